"""What a value looks like: a reference to a secret in code, a provider-style token, a word that reads as a
credential; and the marker that replaces a secret (`[REDACTED:KIND]`, keeping the line count)."""

from __future__ import annotations

import base64
import math
import re
from collections import Counter

CODE_VALUE = re.compile(  # a reference to a secret in code, not the secret: os.environ[...], get_token(), ${VAR}
    r"^(?:[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*[(\[]|[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+$|(?:[a-z]+_)+[a-z]+$|(?:[A-Z]+_)+[A-Z]+$|(?:self|cls|this|os|config|settings|env|process|args|request)\.\w|"
    r"\$\{?[A-Za-z_]\w*\}?$|\{[\w.]*\}$|\{\{.*\}\}$|<[^<>]+>$|%\(\w+\)s$|\*+$|x{4,}$|\.{3}$)",
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
