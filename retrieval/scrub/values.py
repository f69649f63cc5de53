"""What a value looks like: a reference to a secret in code, a provider-style token, a word that reads as a
credential; and the marker that replaces a secret (`[REDACTED:KIND]`, keeping the line count)."""

from __future__ import annotations

import base64
import math
import re
from collections import Counter

CODE_VALUE = re.compile(  # a reference to a secret in code, not the secret: os.environ[...], get_token(), ${VAR}
    r"^(?:[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*[(\[]|[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+$|(?:[a-z]+_)+[a-z]+$|(?:[A-Z]+_)+[A-Z]+$|(?:self|cls|this|os|config|settings|env|process|args|request)\.\w|"
    r"_+[A-Za-z]+(?:_[A-Za-z]+)*$|\$\(|\$\{?[A-Za-z_]\w*\}?$|\{[\w.]*\}$|\{\{.*\}\}$|<[^<>]+>$|%\(\w+\)s$|\*+$|x{4,}$|\.{3}$)",
    re.I,
)
# a provider-style token: a short prefix, "_" or "-", then a random tail of 20+ upper- and lower-case letters and
# digits (ghp_…, glptt-…, NRIQ-…); a value of that shape counts whatever name it is assigned to
PREFIXED_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]{1,9}[_-](?=[\w-]*[A-Z])(?=[\w-]*[a-z])(?=[\w-]*\d)[\w-]{20,}")
_OPAQUE = re.compile(r"[A-Za-z0-9+/_.~=%-]+")  # base64, url-safe, %-encoded: "AAAA…%3D", "b_…=…"
_MEASURE = re.compile(r"\d+(?:[.,]\d+)?[-–]?[A-Za-z]{1,8}s?|[A-Za-z]+-\d{1,4}")  # 256-bit, 90-day, 10mg, COVID-19
_RANDOM = re.compile(r"[A-Za-z0-9+/=_.~-]+")
_WORD_RUN = re.compile(r"[A-Z]?[a-z]{2,}")  # the words of a name (camelCase, snake_case)
_HEX = re.compile(r"[0-9a-fA-F]+")
_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
REDACTED = re.compile(r"\[REDACTED:[A-Z0-9_]+\]")
# a token prefix's word that names a digest or an id, not a credential
_NOT_A_TOKEN = {"sha", "sha1", "sha256", "sha384", "sha512", "md5", "blake2b", "crc32", "hash", "commit", "req"}
_NOT_A_TOKEN |= {"request", "trace", "span", "run", "job", "build", "msg", "evt", "txn", "uuid", "guid"}
_HEX_BODY = re.compile(r"[0-9a-fA-F]{32,}")
_UUID_END = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
_UUID_SHAPE = re.compile(r"[A-Za-z0-9]{8}(?:-[A-Za-z0-9]{4}){3}-[A-Za-z0-9]{12}")  # a UUID, or a key cut as one
_DIGEST = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?)[-:_]")  # an SRI or a digest: sha512-<base64>


def marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}]" + "\n" * secret.count("\n")


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def random_part(part: str) -> bool:
    """A URL path part that is a key, not a word: 20+ characters, letters with digits, high entropy."""
    return (
        len(part) >= 20 and any(c.isdigit() for c in part) and any(c.isalpha() for c in part) and entropy(part) >= 3.5
    )


def random_token(value: str) -> bool:
    """A value that reads as machine-made, not written: 20+ characters of base62/base64 with upper- and lower-case
    letters and digits, varied (high entropy), no long lower-case word in it."""
    return (
        len(value) >= 20
        and _RANDOM.fullmatch(value) is not None
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and sum(c.isdigit() for c in value) >= 2
        and not _written(value)
        and "//" not in value  # a URL or a path, not a key
        and sum(c.isalnum() for c in value) >= 0.85 * len(value)
        and entropy(value) >= 3.7
    )


def _written(value: str) -> bool:
    """Letters mostly in words, with the vowels of words (`MyVeryLongClassName2024`, `org/all-MiniLM-L6-v2`): a
    random draw of letters and digits is that only rarely (short lower-case stretches, few vowels)."""
    letters = [c for c in value if c.isalpha()]
    vowels = sum(c in "aeiouyAEIOUY" for c in letters) / max(len(letters), 1)
    return sum(len(w) for w in _WORD_RUN.findall(value)) >= 0.8 * len(letters) and vowels >= 0.2


_ALNUM_RUNS = re.compile(r"[A-Za-z0-9]+(?:[_.-][A-Za-z0-9]+)*")
_VERSION = re.compile(r"v?\d+(?:[._-]\d+)+[a-z]*\d*")  # 1.2.3, 2024-03-01, 10.7554


def machine_made(value: str, min_len: int = 12) -> bool:
    """A value of one letter case or both, with digits, that reads as drawn, not written: lower-case base36
    (`bltig0ycy4…`), upper-case base32 (`LFPOQLPBV65U…`), hex segments. Drawn characters switch between letter and
    digit often and every part carries digits; a name (`ablation_lr3e4_seed7`), a version or a date does not."""
    parts = re.split(r"[-_.]", value)
    core = "".join(parts)
    if len(core) < min_len or not _ALNUM_RUNS.fullmatch(value) or _VERSION.fullmatch(value):
        return False
    if not all(any(c.isdigit() for c in part) for part in parts):  # a word among the parts: `linux-pip-…`
        return False
    digits = sum(c.isdigit() for c in core)
    switches = sum(a.isdigit() != b.isdigit() for a, b in zip(core, core[1:]))
    if digits < 2 or len(core) - digits < 2 or switches < max(2, len(core) // 10):
        return False
    if core != core.lower() and core != core.upper() and _written(core):  # MyVeryLongClassName2024
        return False
    return entropy(core) >= (3.0 if len(core) < 20 else 3.4)


def random_hex(value: str) -> bool:
    """A hex key or a UUID of 32+ hex digits (letters and digits mixed)."""
    h = value.replace("-", "")
    return len(h) >= 32 and _HEX.fullmatch(h) is not None and not h.isdigit() and not h.isalpha() and entropy(h) >= 3.0


def basic_credentials(value: str) -> bool:
    """Base64 of `user:password` (a container registry's `auth`)."""
    if len(value) < 8 or not _B64.fullmatch(value):
        return False
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    user, sep, password = raw.partition(":")
    return bool(sep and user and password) and raw.isprintable()


def credential_like(word: str, strict: bool) -> bool:
    """A word that reads as a credential: letters with digits or symbols (strict: long, varied, high entropy)."""
    if len(word) < 6 or REDACTED.search(word) or CODE_VALUE.match(word) or "://" in word or _MEASURE.fullmatch(word):
        return False
    has_alpha, has_digit = any(c.isalpha() for c in word), any(c.isdigit() for c in word)
    has_symbol = any(not c.isalnum() and c not in "'’-." for c in word)  # lover's, well-known: words
    if strict:  # one opaque token: no brackets, quotes or `name=`
        return (
            len(word) >= 16 and has_alpha and has_digit and _OPAQUE.fullmatch(word) is not None and entropy(word) >= 3.0
        )
    if not has_alpha or word.isalpha() and len(word) < 20:
        return False
    if word.replace("-", "").isalpha() and len(word) < 20:  # hyphenated words: "well-known"
        return False
    return has_digit or has_symbol or len(word) >= 20


def digest(value: str) -> bool:
    """An SRI or a named digest (`sha512-<base64>`, `sha256:<hex>`), not a key."""
    return _DIGEST.match(value) is not None


def provider_token(value: str, body: str) -> bool:
    """A provider-style token: a prefix (`ghp`, `sl`, `dp.pt`, `pat-na1`) and a random body (either letter case or
    both, base64url, hex segments, a UUID's shape), the prefix no digest's or id's name, the whole no UUID."""
    if _UUID_SHAPE.fullmatch(value) or not (random_token(body) or random_hex(body) or machine_made(body, 20)):
        return False
    uuid = _UUID_END.search(value)
    if uuid and (len(body) < 36 or not any(c.isdigit() for c in value[: uuid.start()])):
        return False  # an id with a name (`session-<uuid>`); a token's prefix has a part like `na1` (`pat-na1-<uuid>`)
    prefix = value[: len(value) - len(body) - 1]
    words = re.split(r"[_.-]", prefix)
    if len(words) >= 2 and all(len(w) >= 3 and w.isalpha() for w in words) and _HEX_BODY.fullmatch(body):
        return False  # words and a digest: a cache key (`linux-pip-` and a hex digest), an artifact's name
    names = {w.lower() for w in words} | set(re.findall(r"[a-z]+", prefix.lower()))
    return not _NOT_A_TOKEN & names
