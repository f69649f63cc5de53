"""The maintained rule sets, run after our own patterns: kingfisher-secret-scanner's provider rules and the
provider plugins of detect-secrets (Twilio, SendGrid, npm, PyPI, ...), line by line. detect-secrets' keyword
and entropy plugins are left out: they redact ordinary prose and hashes."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from ..db import pai_home
from .patterns import fold
from .values import REDACTED, marker

# detect-secrets provider plugins (no keyword/entropy/IP plugins: false positives on prose).
_DS_PLUGINS = (
    "ArtifactoryDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)


def rule_set_pass(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """The maintained provider rule set (kingfisher-secret-scanner: ~490 rules over ~280 providers, from
    Betterleaks/gitleaks and Google's Veles), run in-process by its Rust engine; each secret it finds, where
    no earlier layer already redacted it, becomes `[REDACTED:RULE]`."""
    scanner = rule_set_scanner()
    if scanner is None or not text:
        return text
    data = text.encode("utf-8", "surrogatepass")
    spans = []
    for f in scanner.scan(data):
        if not f.visible:  # a supporting finding (an account name, a domain) kept for validation, not a secret
            continue
        loc = f.location
        a, b = int(loc["start_offset"]), int(loc["end_offset"])
        if 0 <= a < b <= len(data):
            spans.append((a, b, f.rule_id))
    if not spans:
        return text
    merged: list[list] = []  # overlapping findings become one span (their union), named by the first
    for a, b, rule in sorted(spans):
        if merged and a < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b, rule])
    out, pos = [], 0
    for a, b, rule in merged:
        secret = data[a:b].decode("utf-8", "surrogatepass")
        if REDACTED.search(secret) or len(secret.strip()) < 8 or _looks_like_placeholder(secret):
            continue
        kind = _kind(rule.rsplit("/", 1)[-1].split(".", 1)[-1])
        out.append(data[pos:a].decode("utf-8", "surrogatepass") + marker(kind, secret))
        counts[kind] += 1
        if found is not None:
            found.setdefault(secret, kind)
        pos = b
    out.append(data[pos:].decode("utf-8", "surrogatepass"))
    return "".join(out)


def _kind(name: str) -> str:
    """A rule or detector name as a marker kind: "sendgrid-api-token" -> SENDGRID_API_TOKEN."""
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "SECRET"


def _looks_like_placeholder(secret: str) -> bool:
    """`xxxx`, `<password>`, `${TOKEN}`, `your-api-key-here`: documentation, not a secret."""
    core = secret.strip("\"'`<>{}()[]$%")
    return len(set(core.lower())) <= 2 or bool(
        re.fullmatch(r"(?i)(?:your|my)[-_ ]?[a-z_-]*(?:key|token|secret|password|here)", core)
    )


@lru_cache(maxsize=1)
def rule_set_scanner():
    """kingfisher's scanner, built once per process (its compiled rules cached under $PAI_HOME/cache); None
    where the package is not installed (the other layers still run)."""
    try:
        import kingfisher_sdk
    except ImportError:
        return None
    cache = pai_home() / "cache" / "kingfisher"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        rules = kingfisher_sdk.Rules(confidence="medium", cache_dir=cache)
    except OSError:
        rules = kingfisher_sdk.Rules(confidence="medium", cache=False)
    return kingfisher_sdk.Scanner(rules, base64=False)


# needles of the plugins whose regexes are slow (keyword alternations): one of them is in every match (folded
# where the plugin ignores case); the other plugins' regexes are cheap enough to run as they are
_DS_NEEDLES = {
    "ArtifactoryDetector": ("AKC", "AP"),
    "CloudantDetector": ("key", "pw", "pass", "token", "cloudant"),
    "IbmCloudIamDetector": ("key", "pw", "pass", "token"),
    "IbmCosHmacDetector": ("secret",),
    "MailchimpDetector": ("-us",),
    "SoftlayerDetector": ("key", "pw", "pass", "token", "softlayer"),
}


def detect_secrets_pass(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    scan_line, may_match = _detect_secrets_scanner()
    out = []
    for line in text.split("\n"):
        # every provider token carries digits; and a line no plugin's regex matches yields nothing: skip both fast
        if any(c.isdigit() for c in line) and may_match(line):
            for secret in scan_line(line):
                value = secret.secret_value
                if value and value in line and not REDACTED.search(value):
                    kind = _kind(secret.type)
                    counts[kind] += line.count(value)
                    if found is not None:
                        found.setdefault(value, kind)
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
    from detect_secrets.core.scan import get_plugins

    gates = []  # (needles or (), folded?, the plugin's regexes): a plugin reports a line only where one matches
    for plugin in get_plugins():
        regexes = tuple(getattr(plugin, "denylist", ()))
        if not regexes:  # not a regex plugin: no gate can be known, every digit line is scanned
            return scan_line, lambda line: True
        folded = all(r.flags & re.IGNORECASE for r in regexes)
        gates.append((_DS_NEEDLES.get(type(plugin).__name__, ()), folded, regexes))

    def may_match(line: str) -> bool:
        low = fold(line)
        for needles, folded, regexes in gates:
            if needles and not any(n in (low if folded else line) for n in needles):
                continue
            if any(r.search(line) for r in regexes):
                return True
        return False

    return scan_line, may_match
