"""Secret scrubbing before anything is stored: each secret becomes `[REDACTED:KIND]`.

Three layers: our own patterns for the classes we must never miss (tested one by one), context
rules (a value assigned to a secret-ish name, a provider-style `prefix_` token assigned to any name, a
webhook URL's random path, a credential-like word after "password is", "client secret", "deploy token
...", a high-entropy token beside a key id), then the provider plugins of
detect-secrets (Twilio, SendGrid, npm, PyPI, ...) line by line. Its keyword and entropy plugins are
left out: they redact ordinary prose and hashes (a bare hex hash is kept unless a secret-ish word
or a key id stands next to it). Replacements keep the number of lines, so chunk line ranges still
point into the original file. `pai bench scrub` measures the false positives.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .db import pai_home

# Values that look like a credential rather than a word: quoted (any 4+ chars), or unquoted with a
# digit or symbol in them, or long. Prose such as "token: a unit of text" must survive.
_VALUE = r"""(?:"(?P<dq>[^"\n]{4,})"|'(?P<sq>[^'\n]{4,})'|(?P<bare>(?=[^\s,;]*[\d_/+=$!@#%^&*.-])[^\s"',;]{6,}|[^\s"',;]{20,}))"""
# `name = value`, `name: value`, `"name": "value"`, `name => value`, `--name=value`: the name is
# judged by its words (secret_kind), so `DB_PASS`, `MYSQL_PWD` and `private_key_id` count and
# `tokenizer`, `max_tokens` or `password_file` do not.
_ASSIGNMENT = r"""(?<![\w.])(?P<key>[A-Za-z_][\w.-]{0,80}?)["']?\]?[ \t]*(?::=|=>|\?=|\.=|\+=|=|:)[ \t]*"""

# words of a name (split at _ . - and camelCase) that make it secret-ish
_PASSWORD_WORDS = {"password", "passwd", "passphrase", "passcode", "pass", "pwd", "pw", "pword"}
_TOKEN_WORDS = {"token", "apitoken", "authtoken", "accesstoken", "refreshtoken"}
_SECRET_WORDS = {"secret", "credential", "credentials", "creds", "privatekey"}
_KEY_QUALIFIERS = {
    "api",
    "insert",
    "ingest",
    "admin",
    "deploy",
    "sdk",
    "access",
    "secret",
    "private",
    "signing",
    "encryption",
    "master",
    "client",
    "app",
    "consumer",
    "license",
    "account",
    "auth",
    "service",
    "subscription",
    "webhook",
    "shared",
}
# the name's last word says it is about the secret, not the secret itself
_NOT_THE_VALUE = {
    "type",
    "types",
    "length",
    "len",
    "count",
    "file",
    "files",
    "path",
    "name",
    "names",
    "url",
    "uri",
    "endpoint",
    "expiry",
    "expires",
    "expiration",
    "ttl",
    "limit",
    "max",
    "min",
    "size",
    "budget",
    "header",
    "field",
    "env",
    "policy",
    "prompt",
    "reset",
    "hint",
    "format",
    "mode",
    "regex",
    "pattern",
    "kind",
    "version",
    "dir",
    "provider",
    "manager",
    "store",
    "ref",
    "arn",
    "location",
    "label",
    "description",
    "help",
    "required",
    "enabled",
    "rotation",
    "strength",
    "hash",
    "class",
}
_CODE_VALUE = re.compile(  # a reference to a secret in code, not the secret: os.environ[...], get_token(), ${VAR}
    r"^(?:[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*[(\[]|[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+$|(?:[a-z]+_)+[a-z]+$|(?:[A-Z]+_)+[A-Z]+$|(?:self|cls|this|os|config|settings|env|process|args|request)\.\w|"
    r"\$\{?[A-Za-z_]\w*\}?$|\{[\w.]*\}$|\{\{.*\}\}$|<[^<>]+>$|%\(\w+\)s$|\*+$|x{4,}$|\.{3}$)",
    re.I,
)
_SECRET_WORD = re.compile(  # secret-ish words in prose: "password is X", "client secret X", "deploy token ... X"
    r"(?i)(?<![\w-])(?:pass(?:word|wd|phrase|code)|pwd|secret(?:\s+(?:key|access\s+key))?|(?:api|access|private)\s+key"
    r"|tokens?|credentials?|keys?(?=\s+(?:for|of|in|on)\b))(?=[\s:=])"
)
# a provider-style token: a short prefix, "_" or "-", then a random tail of 20+ upper- and lower-case letters and
# digits (ghp_…, glptt-…, NRIQ-…); a value of that shape counts whatever name it is assigned to
_PREFIXED_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]{1,9}[_-](?=[\w-]*[A-Z])(?=[\w-]*[a-z])(?=[\w-]*\d)[\w-]{20,}")
_OPAQUE = re.compile(r"[A-Za-z0-9+/_.~=%-]+")  # base64, url-safe, %-encoded: "AAAA…%3D", "b_…=…"
_PUNCT = "\"'`.,;:!?)(<>[]{}="
_MEASURE = re.compile(r"\d+(?:[.,]\d+)?[-–]?[A-Za-z]{1,8}s?|[A-Za-z]+-\d{1,4}")  # 256-bit, 90-day, 10mg, COVID-19
_CONNECTORS = {
    "is",
    "was",
    "are",
    "were",
    "be",
    "=",
    ":",
    "to",
    "set",
    "of",
    "for",
    "the",
    "our",
    "my",
    "your",
    "its",
    "this",
    "that",
    "it's",
    "here",
    "now",
    "reads",
    "equals",
    "-",
    "->",
    "=>",
    "now:",
}


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]
    group: str | int = 0  # the part that is the secret (the rest stays readable)
    judge: Callable[[re.Match[str]], str | None] | None = None  # the kind for this match, None to leave it


def _judge_assignment(m: re.Match[str]) -> str | None:
    value = next(m.group(g) for g in ("dq", "sq", "bare") if m.group(g) is not None)
    if _CODE_VALUE.match(value.rstrip(")]}")) or value.lower() in ("none", "null", "true", "false"):
        return None
    kind = secret_kind(m.group("key"))
    if kind is None and _PREFIXED_TOKEN.fullmatch(value) and _entropy(value) >= 3.5:
        return "TOKEN"  # a provider-style token under a name that says nothing: GITLAB_TRIGGER = "glptt-…"
    if kind not in (None, "PASSWORD") and value.count(" ") >= 3:  # a message about the token, not a token
        return None
    return kind


def _judge_argument(m: re.Match[str]) -> str | None:
    """A name and value passed together ("API_TOKEN", "...") count when the value reads as a credential: a
    list of words ({"password", "passwd"}) is not an assignment."""
    value = next(m.group(g) for g in ("dq", "sq", "bare") if m.group(g) is not None)
    if not _credential_like(value, strict=False):
        return None
    return _judge_assignment(m)


def secret_kind(name: str) -> str | None:
    """PASSWORD / API_KEY / TOKEN / SECRET when a variable or field name says its value is a secret."""
    words = [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]
    if not words or words[-1] in _NOT_THE_VALUE:
        return None
    joined = "".join(words)
    if any(w in _PASSWORD_WORDS for w in words) or any(p in joined for p in ("password", "passwd", "passphrase")):
        return "PASSWORD"
    if (
        any(w in ("key", "keys") and i > 0 and words[i - 1] in _KEY_QUALIFIERS for i, w in enumerate(words))
        or "apikey" in joined
        or "accesskey" in joined
    ):
        return "API_KEY" if "private" not in words else "SECRET"
    if any(w in _TOKEN_WORDS for w in words) or joined.endswith("token"):
        return "TOKEN"
    if joined.endswith("clientid"):  # an OAuth client id: not secret alone, but half of a credential pair
        return "CLIENT_ID"
    if any(w in _SECRET_WORDS for w in words) or joined.endswith("secret") or "privatekey" in joined:
        return "SECRET"
    return None


def _not_code(m: re.Match[str], kind: str) -> str | None:
    return None if _CODE_VALUE.match(m.group("value")) else kind


PATTERNS: tuple[_Pattern, ...] = (
    _Pattern(
        "PRIVATE_KEY",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        ),
    ),
    _Pattern(
        "PRIVATE_KEY",
        re.compile(  # a key pasted without its END line: the base64 body that follows
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|[\w-]+: .*)[ \t]*)*"
        ),
    ),
    _Pattern("SSH_KEY", re.compile(r"\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+) AAAA[0-9A-Za-z+/]{40,}={0,3}")),
    _Pattern("AWS_ACCESS_KEY", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    _Pattern(
        "AWS_SECRET_KEY",
        re.compile(
            r"(?i)aws.{0,20}?(?:secret|private).{0,20}?['\"]?\s*(?::|=|:=|=>)\s*['\"]?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        "value",
    ),
    _Pattern("GITHUB_TOKEN", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b")),
    _Pattern("GITLAB_TOKEN", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    _Pattern(
        "SLACK_TOKEN",
        re.compile(
            r"\bxox[abposre]-[A-Za-z0-9-]{10,}|(?:https://|\b)hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"
        ),
    ),
    _Pattern(  # a webhook URL holds its secret in the path (Discord, Teams, Zapier, ...): the path goes
        "WEBHOOK_URL",
        re.compile(r"(?i)\bhttps?://[\w.-]+/(?P<value>[^\s\"'<>]*webhook[^\s\"'<>]*)"),
        "value",
        lambda m: "WEBHOOK_URL" if any(_random_part(p) for p in re.split(r"[/@?&=]", m.group("value"))) else None,
    ),
    _Pattern("STRIPE_KEY", re.compile(r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    _Pattern("GOOGLE_API_KEY", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    _Pattern("LLM_API_KEY", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{32,}")),
    _Pattern("HF_TOKEN", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    _Pattern("JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    _Pattern("BEARER_TOKEN", re.compile(r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)"), "value"),
    _Pattern("BASIC_AUTH", re.compile(r"(?i)\bauthorization:?\s*basic\s+(?P<value>[A-Za-z0-9+/]{8,}={0,2})"), "value"),
    _Pattern(
        "DB_PASSWORD",
        re.compile(
            r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb)"
            r"(?:\+\w+)?://[^\s:/@]*:(?P<value>[^\s@/]+)@"
        ),
        "value",
        lambda m: _not_code(m, "DB_PASSWORD"),
    ),
    _Pattern(
        "URL_PASSWORD",
        re.compile(  # user:password@ in any other URL (the user may be empty, as redis has it)
            r"\b[a-z][a-z0-9+.-]*://[^\s:/@\[\]]*:(?P<value>[^\s@/\[\]]+)@(?=[\w.\[-])", re.I
        ),
        "value",
        lambda m: _not_code(m, "URL_PASSWORD"),
    ),
    _Pattern(
        "PASSWORD",
        re.compile(r"(?<![\w-])(?:-u|--user)[ \t]+[^\s:'\"]+:(?P<value>[^\s'\"]{4,})"),
        "value",
        lambda m: _not_code(m, "PASSWORD"),
    ),  # curl -u user:pw
    _Pattern(
        "PASSWORD", re.compile(r"\b(?:mysql\w*|mariadb\w*)\b[^\n]*?[ \t]-p(?P<value>[^\s-][^\s]{3,})"), "value"
    ),  # mysql -pPW
    _Pattern(
        "PASSWORD",
        re.compile(
            r"(?i)(?:(?<![\w-])--?(?:password|passwd|pass|pwd|token|secret|api-?key|auth-token|access-token|client-secret)"
            r"|\bsshpass\s+-p)(?:=|\s+)['\"]?(?P<value>[^\s'\"]{4,})"
        ),
        "value",
        lambda m: _not_code(m, "PASSWORD"),
    ),
    _Pattern(
        "SECRET",
        re.compile(  # <password>x</password>, <secret>x</secret>
            r"<(?P<key>[\w.-]{2,40})>(?P<value>[^<>\s]{4,})</(?P=key)>"
        ),
        "value",
        lambda m: secret_kind(m.group("key")),
    ),
    _Pattern("SECRET", re.compile(_ASSIGNMENT + _VALUE), "value", _judge_assignment),
    _Pattern(  # a name and its value as call arguments: System.setProperty("API_TOKEN", "..."), put("password", "...")
        "SECRET",
        re.compile(r"""["'](?P<key>[A-Za-z_][\w.-]{0,80})["'][ \t]*,[ \t]*""" + _VALUE),
        "value",
        _judge_argument,
    ),
    _Pattern(  # config entries: <add key="ApiToken" value="..."/>, <property name="db.password" value="..."/>
        "SECRET",
        re.compile(
            r"""\b(?:key|name)[ \t]*=[ \t]*["'](?P<key>[A-Za-z_][\w.:-]{0,80})["'][ \t]+value[ \t]*=[ \t]*""" + _VALUE
        ),
        "value",
        _judge_assignment,
    ),
)

_REDACTED = re.compile(r"\[REDACTED:[A-Z0-9_]+\]")
# a secret standing beside a key id: (marker of the id, the secret's shape, its kind)
_BESIDE_KEY_ID = (
    (
        "[REDACTED:AWS_ACCESS_KEY]",
        re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
        "AWS_SECRET_KEY",
    ),
    ("[REDACTED:TWILIO_API_KEY]", re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32}(?![0-9A-Za-z])"), "TWILIO_AUTH_TOKEN"),
)
_KEY_ID_WINDOW = 200  # characters either side of a key id searched for its secret

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


_RULES_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]  # the rules this process loaded


@lru_cache(maxsize=1)
def version() -> str:
    """What scrubbed a text: this module's rules (a digest of its source, as imported) and the rule sets it runs.
    Stored with every document; a document scrubbed under another version is re-scrubbed by `pai maintain`."""
    from importlib import metadata

    parts = [f"rules-{_RULES_DIGEST}"]
    for dist in ("kingfisher-secret-scanner", "detect-secrets"):
        try:
            parts.append(f"{dist}-{metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}-none")
    return "+".join(parts)


@dataclass
class ScrubResult:
    text: str
    counts: Counter = field(default_factory=Counter)  # kind -> number of secrets redacted


def scrub(text: str) -> ScrubResult:
    """Replace every secret found in `text` with `[REDACTED:KIND]`, keeping line count."""
    counts: Counter = Counter()
    for p in PATTERNS:
        text = _apply(p, text, counts)
    text = _rule_set_pass(text, counts)
    text = _detect_secrets_pass(text, counts)
    text = _beside_key_ids(text, counts)
    text = _after_secret_words(text, counts)
    return ScrubResult(text, counts)


def scrub_text(text: str | None) -> str | None:
    """`scrub(text).text`, passing None through (optional fields: titles, answers, corrections)."""
    return None if text is None else scrub(text).text


def _apply(p: _Pattern, text: str, counts: Counter) -> str:
    out, pos = [], 0
    while m := p.regex.search(text, pos):
        group = p.group
        if group == "value":
            group = next(g for g in ("value", "dq", "sq", "bare") if m.groupdict().get(g) is not None)
        secret = m.group(group)
        kind = None if "[REDACTED:" in secret else p.judge(m) if p.judge else p.kind  # redacted already: leave it
        if kind is None:  # not a secret: look again from inside it (`https://host/?api_key=...`)
            nxt = m.start(group) if m.start(group) > m.start() else m.start() + 1
            out.append(text[pos:nxt])
            pos = nxt
            continue
        counts[kind] += 1
        out.append(text[pos : m.start(group)] + _marker(kind, secret))
        pos = m.end(group)
        if pos == m.start(group):
            break
    out.append(text[pos:])
    return "".join(out)


def _marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}]" + "\n" * secret.count("\n")


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _random_part(part: str) -> bool:
    """A URL path part that is a key, not a word: 20+ characters, letters with digits, high entropy."""
    return (
        len(part) >= 20 and any(c.isdigit() for c in part) and any(c.isalpha() for c in part) and _entropy(part) >= 3.5
    )


def _credential_like(word: str, strict: bool) -> bool:
    """A word that reads as a credential: letters with digits or symbols (strict: long, varied, high entropy)."""
    if len(word) < 6 or _REDACTED.search(word) or _CODE_VALUE.match(word) or "://" in word or _MEASURE.fullmatch(word):
        return False
    has_alpha, has_digit = any(c.isalpha() for c in word), any(c.isdigit() for c in word)
    has_symbol = any(not c.isalnum() and c not in "'’-." for c in word)  # lover's, well-known: words
    if strict:  # one opaque token: no brackets, quotes or `name=`
        return (
            len(word) >= 16
            and has_alpha
            and has_digit
            and _OPAQUE.fullmatch(word) is not None
            and _entropy(word) >= 3.0
        )
    if not has_alpha or word.isalpha() and len(word) < 20:
        return False
    if word.replace("-", "").isalpha() and len(word) < 20:  # hyphenated words: "well-known"
        return False
    return has_digit or has_symbol or len(word) >= 20


def _after_secret_words(text: str, counts: Counter) -> str:
    """`password is X`, `client secret X`, `the deploy token for prod is X`: the first credential-like
    word right after a secret-ish word (past connectors such as "is", ":"), or a high-entropy token
    a few words further on the same line."""
    if not _SECRET_WORD.search(text):
        return text
    out, pos = [], 0
    for m in _SECRET_WORD.finditer(text):
        if m.start() < pos:
            continue
        line_end = text.find("\n", m.end())
        rest = text[m.end() : line_end if line_end >= 0 else len(text)]
        gap = 0  # words between the secret-ish word and the value, connectors aside
        for i, w in enumerate(re.finditer(r"\S+", rest)):
            raw = w.group(0)
            word = raw.strip(_PUNCT)
            if i >= 6 or _REDACTED.search(raw):
                break
            if not word or word.lower() in _CONNECTORS:
                continue
            if _credential_like(word, strict=gap > 0):
                start = m.end() + w.start() + raw.find(word)
                kind = secret_kind(m.group(0).replace(" ", "_")) or "SECRET"
                out.append(text[pos:start] + f"[REDACTED:{kind}]")
                counts[kind] += 1
                pos = start + len(word)
                break
            gap += 1
            if raw.endswith((".", "!", "?")):  # the sentence ends
                break
    out.append(text[pos:])
    return "".join(out)


def _beside_key_ids(text: str, counts: Counter) -> str:
    """A secret next to its key id in prose: "the key AKIA... with secret <40 chars>"."""
    for marker, shape, kind in _BESIDE_KEY_ID:
        ids = [m.start() for m in re.finditer(re.escape(marker), text)]
        if not ids:
            continue

        def repl(m: re.Match[str], ids=ids, marker=marker, kind=kind) -> str:
            near = any(i - _KEY_ID_WINDOW <= m.start() <= i + len(marker) + _KEY_ID_WINDOW for i in ids)
            if not near or m.group(0).isalpha() or m.group(0).isdigit():
                return m.group(0)
            counts[kind] += 1
            return f"[REDACTED:{kind}]"

        text = shape.sub(repl, text)
    return text


def _rule_set_pass(text: str, counts: Counter) -> str:
    """The maintained provider rule set (kingfisher-secret-scanner: ~490 rules over ~280 providers, from
    Betterleaks/gitleaks and Google's Veles), run in-process by its Rust engine; each secret it finds, where
    no earlier layer already redacted it, becomes `[REDACTED:RULE]`."""
    scanner = _rule_set_scanner()
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
        if _REDACTED.search(secret) or len(secret.strip()) < 8 or _looks_like_placeholder(secret):
            continue
        kind = _kind(rule.rsplit("/", 1)[-1].split(".", 1)[-1])
        out.append(data[pos:a].decode("utf-8", "surrogatepass") + _marker(kind, secret))
        counts[kind] += 1
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
def _rule_set_scanner():
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


def _detect_secrets_pass(text: str, counts: Counter) -> str:
    scan_line = _detect_secrets_scanner()
    out = []
    for line in text.split("\n"):
        if any(c.isdigit() for c in line):  # every provider token carries digits; skip pure prose fast
            for secret in scan_line(line):
                value = secret.secret_value
                if value and value in line and not _REDACTED.search(value):
                    kind = _kind(secret.type)
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
