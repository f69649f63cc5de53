"""Secret scrubbing before anything is stored: each secret becomes `[REDACTED:KIND]`.

Two layers: our own patterns for the classes we must never miss (tested one by one), then the
provider plugins of detect-secrets (Twilio, SendGrid, npm, PyPI, ...) line by line. Its keyword and
entropy plugins are left out: they redact ordinary prose and hashes. Replacements keep the number
of lines, so chunk line ranges still point into the original file.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

# Values that look like a credential rather than a word: quoted (any 4+ chars), or unquoted with a
# digit or symbol in them, or long. Prose such as "token: a unit of text" must survive.
_VALUE = r"""(?:"(?P<dq>[^"\n]{4,})"|'(?P<sq>[^'\n]{4,})'|(?P<bare>(?=[^\s,;]*[\d_/+=$!@#%^&*.-])[^\s"',;]{6,}|[^\s"',;]{20,}))"""
_ASSIGN = r"""(?i)\b[\w.-]*?(?:{names})[\w.-]*?["']?\s*(?::|=|:=|=>)\s*"""


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]
    group: str | int = 0  # the part that is the secret (the rest stays readable)


def _assign(kind: str, names: str) -> _Pattern:
    return _Pattern(kind, re.compile(_ASSIGN.format(names=names) + _VALUE), "value")


PATTERNS: tuple[_Pattern, ...] = (
    _Pattern("PRIVATE_KEY", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    _Pattern("SSH_KEY", re.compile(r"\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+) AAAA[0-9A-Za-z+/]{40,}={0,3}")),
    _Pattern("AWS_ACCESS_KEY", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    _Pattern("AWS_SECRET_KEY", re.compile(
        r"(?i)aws.{0,20}?(?:secret|private).{0,20}?['\"]?\s*(?::|=|:=|=>)\s*['\"]?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
        "value"),
    _Pattern("GITHUB_TOKEN", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b")),
    _Pattern("SLACK_TOKEN", re.compile(
        r"\bxox[abposre]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+")),
    _Pattern("STRIPE_KEY", re.compile(r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    _Pattern("GOOGLE_API_KEY", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    _Pattern("LLM_API_KEY", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{32,}")),
    _Pattern("JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    _Pattern("BEARER_TOKEN", re.compile(r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)"), "value"),
    _Pattern("DB_PASSWORD", re.compile(
        r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb)"
        r"(?:\+\w+)?://[^\s:/@]+:(?P<value>[^\s@/]+)@"), "value"),
    _assign("PASSWORD", r"password|passwd|passphrase|\bpwd"),
    _assign("API_KEY", r"api[_-]?key|apikey|access[_-]?key"),
    _assign("SECRET", r"secret"),
    _assign("TOKEN", r"token"),
)  # fmt: skip

_REDACTED = re.compile(r"\[REDACTED:[A-Z0-9_]+\]")

# detect-secrets provider plugins (no keyword/entropy/IP plugins: false positives on prose).
_DS_PLUGINS = (
    "ArtifactoryDetector", "AzureStorageKeyDetector", "BasicAuthDetector", "CloudantDetector",
    "DiscordBotTokenDetector", "GitLabTokenDetector", "IbmCloudIamDetector", "IbmCosHmacDetector",
    "MailchimpDetector", "NpmDetector", "OpenAIDetector", "PypiTokenDetector", "SendGridDetector",
    "SoftlayerDetector", "SquareOAuthDetector", "TelegramBotTokenDetector", "TwilioKeyDetector",
)  # fmt: skip


@dataclass
class ScrubResult:
    text: str
    counts: Counter = field(default_factory=Counter)  # kind -> number of secrets redacted


def scrub(text: str) -> ScrubResult:
    """Replace every secret found in `text` with `[REDACTED:KIND]`, keeping line count."""
    counts: Counter = Counter()
    for p in PATTERNS:
        text = _apply(p, text, counts)
    text = _detect_secrets_pass(text, counts)
    return ScrubResult(text, counts)


def _apply(p: _Pattern, text: str, counts: Counter) -> str:
    def repl(m: re.Match[str]) -> str:
        group = p.group
        if group == "value":
            group = next(g for g in ("value", "dq", "sq", "bare") if m.groupdict().get(g) is not None)
        secret = m.group(group)
        if _REDACTED.fullmatch(secret) or "[REDACTED:" in secret:
            return m.group(0)  # already redacted by an earlier, more specific pattern
        counts[p.kind] += 1
        s, e = m.start(group) - m.start(0), m.end(group) - m.start(0)
        whole = m.group(0)
        return whole[:s] + _marker(p.kind, secret) + whole[e:]

    return p.regex.sub(repl, text)


def _marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}]" + "\n" * secret.count("\n")


def _detect_secrets_pass(text: str, counts: Counter) -> str:
    scan_line = _detect_secrets_scanner()
    out = []
    for line in text.split("\n"):
        if any(c.isdigit() for c in line):  # every provider token carries digits; skip pure prose fast
            for secret in scan_line(line):
                value = secret.secret_value
                if value and value in line and not _REDACTED.search(value):
                    kind = re.sub(r"[^A-Z0-9]+", "_", secret.type.upper()).strip("_")
                    counts[kind] += line.count(value)
                    line = line.replace(value, f"[REDACTED:{kind}]")
        out.append(line)
    return "\n".join(out)


@lru_cache(maxsize=1)
def _detect_secrets_scanner():
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import get_settings

    settings = get_settings()
    settings.clear()
    settings.configure_plugins([{"name": name} for name in _DS_PLUGINS])
    settings.disable_filters("detect_secrets.filters.heuristic.is_indirect_reference")
    return scan_line
