"""Our own patterns, for the classes we must never miss (tested one by one): private and SSH keys, cloud and
provider tokens, passwords in URLs and command lines, and a value assigned to a secret-ish name (or a
provider-style `prefix_` token assigned to any name), in assignments, call arguments and config entries."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from .names import WEAK_WORDS, may_name_a_credential, name_words, secret_kind
from .values import (
    CODE_VALUE,
    PREFIXED_TOKEN,
    basic_credentials,
    credential_like,
    digest,
    entropy,
    machine_made,
    marker,
    provider_token,
    random_hex,
    random_part,
    random_token,
)

# Values that look like a credential rather than a word: quoted (any 4+ chars), or unquoted with a
# digit or symbol in them, or long. Prose such as "token: a unit of text" must survive.
_VALUE = r"""(?:"(?P<dq>[^"\n]{4,1024})"|'(?P<sq>[^'\n]{4,1024})'|(?P<bare>(?=[^\s,;\x00]{0,256}?[\d_/+=$!@#%^&*.-])[^\s"',;\x00]{6,1024}|[^\s"',;\x00]{20,1024}))"""
# (bounded: a value is judged, and on a miss searched again from inside it; unbounded, a 1 MB line of `a=b&` is
# searched to its end at every `=`)
# `name = value`, `name: value`, `"name": "value"`, `name => value`, `--name=value`: the name is
# judged by its words (secret_kind), so `DB_PASS`, `MYSQL_PWD` and `private_key_id` count and
# `tokenizer`, `max_tokens` or `password_file` do not.
_ASSIGNMENT = r"""(?<![\w.])(?P<key>[A-Za-z_][\w.-]{0,80}?)["']?\]?[ \t]*(?::=|=>|\?=|\.=|\+=|=|:)[ \t]*"""


_PIN = re.compile(r"[=<>~!^]*v?\d+(?:\.\d+)+(?:[.-]?[a-z]+\d*)?")


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern[str]
    group: str | int = 0  # the part that is the secret (the rest stays readable)
    judge: Callable[[re.Match[str]], str | None] | None = None  # the kind for this match, None to leave it
    needles: tuple[str, ...] = ()  # every match holds one of these (folded where the regex ignores case): a text
    # without any is not searched. A test holds that the scrubber's output is the same without them.
    gate: re.Pattern[str] | None = None  # a cheaper regex every match holds a match of: a text without one is not
    # searched (the same test holds it)
    folded: bool = field(init=False)  # the regex ignores case: its needles are looked for in the folded text

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", bool(self.regex.flags & re.IGNORECASE))


# characters that an IGNORECASE regex matches to an ASCII letter beyond its two cases (found by searching every code
# point with `(?i)[a-z]`; a test does it again): folded to that letter before the needles are looked for
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u212a": "k", "\u017f": "s"})


def fold(text: str) -> str:
    """`text` as an IGNORECASE regex sees letters: a needle matched case-insensitively is found in it literally."""
    return text.lower() if text.isascii() else text.translate(_FOLD).lower()


def may_match(p: Pattern, text: str, folded: str) -> bool:
    """False where `p` cannot match: none of its needles in `text` (in `folded`, `fold(text)`, where it ignores case),
    or no match of its gate."""
    if p.needles and not any(n in (folded if p.folded else text) for n in p.needles):
        return False
    return p.gate is None or p.gate.search(text) is not None


def _judge_assignment(m: re.Match[str]) -> str | None:
    value = next(m.group(g) for g in ("dq", "sq", "bare") if m.group(g) is not None)
    if CODE_VALUE.match(value.rstrip(")]}")) or value.lower() in ("none", "null", "true", "false"):
        return None
    kind = secret_kind(m.group("key"))
    if kind is None:
        return _judge_unnamed(m.group("key"), value)
    if kind not in (None, "PASSWORD") and value.count(" ") >= 3:  # a message about the token, not a token
        return None
    if kind in ("TOKEN", "API_KEY") and value.isalpha() and value.islower() and len(value) < 16:
        return None  # a word (`token: "another"` in an example), not a machine-made token
    if _PIN.fullmatch(value.rstrip("`)]}.")):
        return None  # a version pin (`kingfisher-secret-scanner==1.5.0`), not a secret
    return kind


def _judge_unnamed(key: str, value: str) -> str | None:
    """A value under a name that does not say it holds a secret (a log line's unquoted Key, a variable named
    after the provider, a registry's base64 auth of user:password): it counts where the value reads as
    machine-made."""
    if PREFIXED_TOKEN.fullmatch(value) and entropy(value) >= 3.5:
        return "TOKEN"  # a provider-style token under a name that says nothing: GITLAB_TRIGGER = "glptt-…"
    words = name_words(key)
    if not may_name_a_credential(key):
        return None
    if words[-1] == "auth" and basic_credentials(value):
        return "BASIC_AUTH"
    if random_token(value.rstrip("=")):
        return "API_KEY" if words[-1] in WEAK_WORDS else "SECRET"
    if words[-1] in WEAK_WORDS and machine_made(value, 12):  # a log's `Key=bltig0ycy4…`, `key: LFPOQ65U…`
        return "API_KEY"
    if machine_made(value, 24) and not random_hex(value):  # `kario: <40 of base36>` under the provider's name
        return "SECRET"
    env_name = key.isupper() or words[-1] in WEAK_WORDS  # SENDGRID=<hex>; a lower-case name holds hashes in code
    return "SECRET" if env_name and (random_hex(value) or key.isupper() and machine_made(value, 20)) else None


def _judge_prefixed(m: re.Match[str]) -> str | None:
    value, body = m.group("value"), m.group("body")
    if "." in body and not value[: len(value) - len(body)].islower():
        return None  # dotted parts after a lower-case prefix only (pk.…); SG.….… is the rule sets' to name
    for _ in range(3):  # the longest body first, then with its first parts taken into the prefix (A3-DDERXI-…)
        if provider_token(value, body):
            return "TOKEN"
        cut = re.search(r"[_-]", body)
        if cut is None or len(body) - cut.end() < 20:
            return None
        body = body[cut.end() :]
    return None


def _judge_argument(m: re.Match[str]) -> str | None:
    """A name and value passed together ("API_TOKEN", "...") count when the value reads as a credential: a
    list of words ({"password", "passwd"}) is not an assignment."""
    value = next(m.group(g) for g in ("dq", "sq", "bare") if m.group(g) is not None)
    if not credential_like(value, strict=False):
        return None
    return _judge_assignment(m)


def _not_code(m: re.Match[str], kind: str) -> str | None:
    return None if CODE_VALUE.match(m.group("value")) else kind


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "PRIVATE_KEY",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        ),
        needles=("-----BEGIN ",),
    ),
    Pattern(
        "PRIVATE_KEY",
        re.compile(  # a key pasted without its END line: the base64 body that follows
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|[\w-]+: .*)[ \t]*)*"
        ),
        needles=("-----BEGIN ",),
    ),
    Pattern(
        "SSH_KEY",
        re.compile(r"\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+) AAAA[0-9A-Za-z+/]{40,}={0,3}"),
        needles=(" AAAA",),
    ),
    Pattern(
        "AWS_ACCESS_KEY",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
        needles=("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA"),
    ),
    Pattern(
        "AWS_SECRET_KEY",
        re.compile(
            r"(?i)aws.{0,20}?(?:secret|private).{0,20}?['\"]?\s*(?::|=|:=|=>)\s*['\"]?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        "value",
        needles=("aws",),
    ),
    Pattern(
        "GITHUB_TOKEN",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Pattern("GITLAB_TOKEN", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), needles=("glpat-",)),
    Pattern(
        "SLACK_TOKEN",
        re.compile(
            r"\bxox[abposre]-[A-Za-z0-9-]{10,}|(?:https://|\b)hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"
        ),
        needles=("xox", "hooks.slack.com/services/"),
    ),
    Pattern(  # a webhook URL holds its secret in the path (Discord, Teams, Zapier, ...): the path goes
        "WEBHOOK_URL",
        re.compile(r"(?i)\bhttps?://[\w.-]+/(?P<value>[^\s\"'<>]*webhook[^\s\"'<>]*)"),
        "value",
        lambda m: "WEBHOOK_URL" if any(random_part(p) for p in re.split(r"[/@?&=]", m.group("value"))) else None,
        needles=("webhook",),
    ),
    Pattern(
        "STRIPE_KEY", re.compile(r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}\b"), needles=("_live_", "_test_")
    ),
    Pattern("GOOGLE_API_KEY", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), needles=("AIza",)),
    Pattern("LLM_API_KEY", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{32,}"), needles=("sk-",)),
    Pattern("HF_TOKEN", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), needles=("hf_",)),
    Pattern("JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), needles=("eyJ",)),
    Pattern(
        "BEARER_TOKEN", re.compile(r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)"), "value", needles=("bearer",)
    ),
    Pattern(
        "BASIC_AUTH",
        re.compile(r"(?i)\bauthorization:?\s*basic\s+(?P<value>[A-Za-z0-9+/]{8,}={0,2})"),
        "value",
        needles=("basic",),
    ),
    Pattern(
        "DB_PASSWORD",
        re.compile(
            r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb)"
            r"(?:\+\w+)?://[^\s:/@]*:(?P<value>[^\s@/]+)@"
        ),
        "value",
        lambda m: _not_code(m, "DB_PASSWORD"),
        needles=("://",),
    ),
    Pattern(
        "URL_PASSWORD",
        re.compile(  # user:password@ in any other URL (the user may be empty, as redis has it)
            r"\b[a-z][a-z0-9+.-]*://[^\s:/@\[\]]*:(?P<value>[^\s@/\[\]]+)@(?=[\w.\[-])", re.I
        ),
        "value",
        lambda m: _not_code(m, "URL_PASSWORD"),
        needles=("://",),
    ),
    Pattern(
        "PASSWORD",
        re.compile(r"(?<![\w-])(?:-u|--user)[ \t]+[^\s:'\"]+:(?P<value>[^\s'\"]{4,})"),
        "value",
        lambda m: _not_code(m, "PASSWORD"),
        needles=("-u",),
    ),  # curl -u user:pw
    Pattern(
        "PASSWORD",
        re.compile(r"\b(?:mysql\w*|mariadb\w*)\b[^\n]{0,300}?[ \t]-p(?P<value>[^\s-][^\s]{3,})"),
        "value",
        needles=("mysql", "mariadb"),
    ),  # mysql -pPW
    Pattern(
        "PASSWORD",
        re.compile(
            r"(?i)(?:(?<![\w-])--?(?:password|passwd|pass|pwd|token|secret|api-?key|auth-token|access-token|client-secret)"
            r"|\bsshpass\s+-p)(?:=|\s+)['\"]?(?P<value>[^\s'\"]{4,})"
        ),
        "value",
        lambda m: _not_code(m, "PASSWORD"),
        needles=("-pass", "-pwd", "-token", "-secret", "-api", "sshpass"),
    ),
    Pattern(
        "SECRET",
        re.compile(  # <password>x</password>, <secret>x</secret>
            r"<(?P<key>[\w.-]{2,40})>(?P<value>[^<>\s]{4,})</(?P=key)>"
        ),
        "value",
        lambda m: secret_kind(m.group("key")),
        needles=("</",),
    ),
    Pattern("SECRET", re.compile(_ASSIGNMENT + _VALUE), "value", _judge_assignment, needles=(":", "=")),
    Pattern(  # Authorization: token X, Authorization: <raw key>, "authorization": "Key X", X-Api-Key: X
        "AUTH_HEADER",
        re.compile(
            r"(?i)\b(?:authori[sz]ation|x-[\w-]*(?:key|token|auth))[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?:(?:bearer|token|basic|key|apikey|api-key|sso-key|bot|digest|otp|klaviyo-api-key|[a-z]+-?hmac[\w-]*)[ \t]+)?"
            r"(?P<value>[A-Za-z0-9._~+/:=-]{12,})"
        ),
        "value",
        lambda m: (
            None
            if CODE_VALUE.match(m.group("value")) or not any(c.isdigit() for c in m.group("value"))
            else "AUTH_HEADER"
        ),
        needles=("authori", "x-"),
    ),
    Pattern(  # <string name="api_key">X</string>, <entry key="password">X</entry>, <add name="token">X</add>
        "SECRET",
        re.compile(
            r"""<(?P<tag>[\w:.-]{1,40})\b[^<>]*?\b(?:name|key|id)[ \t]*=[ \t]*["'](?P<key>[A-Za-z_][\w.:-]{0,80})["'][^<>]*>"""
            r"""(?P<value>[^<>\s]{4,})</(?P=tag)>"""
        ),
        "value",
        lambda m: secret_kind(m.group("key")) or _judge_unnamed(m.group("key"), m.group("value")),
        needles=("</",),
    ),
    Pattern(  # docker login -u user -p X, a registry password on a command line
        "PASSWORD",
        re.compile(r"\blogin\b[^\n]{0,300}?[ \t]-p[ \t]+['\"]?(?P<value>[^\s'\"]{4,})"),
        "value",
        lambda m: _not_code(m, "PASSWORD"),
        needles=("login",),
    ),
    Pattern(  # a token as a URL's user: https://<token>@github.com/...
        "URL_TOKEN",
        re.compile(r"\b[a-z][a-z0-9+.-]*://(?P<value>[^\s:/@\[\]]{20,})@(?=[\w.-])", re.I),
        "value",
        lambda m: "URL_TOKEN" if random_token(m.group("value")) or random_hex(m.group("value")) else None,
        needles=("://",),
    ),
    Pattern(  # a provider-style token anywhere: a short prefix, "_", "-" or ".", a machine-made body, base64url too
        # (ghp_…, xoxb-…, sk_live_…, glpat-…, sl.…, NRAK-…, and the providers outside every list)
        "TOKEN",
        re.compile(
            r"(?<![\w./+-])(?P<value>(?P<prefix>[A-Za-z][A-Za-z0-9]{1,9})(?:[_.-][A-Za-z0-9]{2,9}){0,2}?[_.-]"
            r"(?P<body>[A-Za-z0-9]{8}(?:-[A-Za-z0-9]{4}){3}-[A-Za-z0-9]{12}(?![\w-])|[A-Za-z0-9][A-Za-z0-9_-]{19,}(?:\.[A-Za-z0-9_-]{4,})*))"
            r"(?![\w/+=-]|\.[\w/+=-])"
        ),
        "value",
        _judge_prefixed,
        needles=("_", "-", "."),
        gate=re.compile(r"[_.-][A-Za-z0-9][A-Za-z0-9_-]{19}"),  # the separator and the body's first 20 (a UUID's too)
    ),
    Pattern(  # a quoted machine-made string passed or assigned anywhere: Client("…"), new Api('…')
        "SECRET",
        re.compile(r"""(?<![\w\\])(?P<q>["'`])(?P<value>[A-Za-z0-9+/_.~-]{24,}={0,2})(?P=q)"""),
        "value",
        lambda m: (
            "SECRET"
            if random_token(m.group("value").rstrip("="))
            and entropy(m.group("value")) >= 4.0
            and not digest(m.group("value"))
            else None
        ),
        needles=('"', "'", "`"),
    ),
    Pattern(  # a name and its value as call arguments: System.setProperty("API_TOKEN", "..."), put("password", "...")
        "SECRET",
        re.compile(r"""["'](?P<key>[A-Za-z_][\w.-]{0,80})["'][ \t]*,[ \t]*""" + _VALUE),
        "value",
        _judge_argument,
        needles=(",",),
    ),
    Pattern(  # config entries: <add key="ApiToken" value="..."/>, <property name="db.password" value="..."/>
        "SECRET",
        re.compile(
            r"""\b(?:key|name)[ \t]*=[ \t]*["'](?P<key>[A-Za-z_][\w.:-]{0,80})["'][ \t]+value[ \t]*=[ \t]*""" + _VALUE
        ),
        "value",
        _judge_assignment,
        needles=("value",),
    ),
)


def apply_pattern(p: Pattern, text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """`text` with each match of `p` that its judge calls a secret replaced by a marker; each secret into `found`."""
    out, pos, replaced = [], 0, False
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
        if found is not None:
            found.setdefault(secret, kind)
        replaced = True
        out.append(text[pos : m.start(group)] + marker(kind, secret))
        pos = m.end(group)
        if pos == m.start(group):
            break
    if not replaced:  # the same object: a caller's folded copy of it still holds
        return text
    out.append(text[pos:])
    return "".join(out)
