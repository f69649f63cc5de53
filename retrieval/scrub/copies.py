"""Every copy of a known secret, and the id beside it. Once any layer redacted a value, each other occurrence of
that exact value goes too (the bare second copy in a log, in another chunk of the document, in another field of
the same row: `redact_copies`); and an identifier that is half of a credential pair (an access key id, a client
id, a role id, a consumer key, a user name) goes when it stands in the same block as a redacted secret
(`redact_pair_ids`)."""

from __future__ import annotations

import re
from collections import Counter

from .names import name_words
from .values import CODE_VALUE, REDACTED, marker

MIN_COPY = 6  # shorter values ("abc", "1234") are words and numbers too often to chase every copy of
_PAIR_LINES = 3  # an id within this many lines of a redacted secret, with no blank line between, is its pair
# the last word of a name for the public half of a credential pair
_ID_WORDS = {"id", "sid", "uid", "guid", "key", "user", "username", "login", "account", "tenant", "principal"}
_USER_NAME = re.compile(r"[\w.@+-]{2,}")
_ID_ASSIGNMENT = re.compile(  # `name = value`, `"name": "value"`, `name: value`, `<name>value</name>`
    r"""(?<![\w.])["']?(?P<key>[A-Za-z_][\w.-]{0,60}?)["']?[ \t]*(?::=|=>|=|:)[ \t]*["']?(?P<value>[\w.@+/=:-]{3,200}?)["']?(?=[\s,;}\])]|$)"""
    r"""|<(?P<tag>[A-Za-z_][\w.-]{0,60})>(?P<tagvalue>[^<>\s]{3,200})</(?P=tag)>""",
    re.M,
)


def redact_copies(text: str, found: dict[str, str], counts: Counter) -> str:
    """Each further occurrence of a value in `found` (secret -> kind), standing alone (not inside a longer
    word), replaced by its marker."""
    secrets = [s for s in found if len(s.strip()) >= MIN_COPY and s in text and not REDACTED.search(s)]
    if not secrets:
        return text
    spans = []  # (start, end, secret) of each copy standing alone; found with str.find, linear per secret
    for secret in secrets:
        i = text.find(secret)
        while i >= 0:
            j = i + len(secret)
            if not (_word(secret[0]) and i > 0 and _word(text[i - 1])) and not (
                _word(secret[-1]) and j < len(text) and _word(text[j])
            ):
                spans.append((i, j, secret))
            i = text.find(secret, i + 1)
    if not spans:
        return text
    out, pos = [], 0
    for a, b, secret in sorted(spans, key=lambda x: (x[0], x[0] - x[1])):  # the longest copy where two overlap
        if a < pos:
            continue
        kind = found[secret]
        counts[kind] += 1
        out.append(text[pos:a] + marker(kind, secret))
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _word(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _id_like(name: list[str], value: str) -> bool:
    if REDACTED.search(value) or value.lower() in ("none", "null", "true", "false"):
        return False
    if name[-1] in ("user", "username", "login"):  # bob.smith reads as code (an attribute) but is a name here
        return _USER_NAME.fullmatch(value) is not None
    if CODE_VALUE.match(value):
        return False
    return len(value) >= 8 and (any(c.isdigit() for c in value) or len(value) >= 16)


def redact_pair_ids(text: str, found: dict[str, str], counts: Counter) -> str:
    """An id-ish name's value within `_PAIR_LINES` lines of a marker, in the same block (no blank line between)."""
    if "[REDACTED:" not in text:
        return text
    lines = text.split("\n")
    block, blocks = 0, []  # each line's block: blank lines separate them
    for line in lines:
        block += not line.strip()
        blocks.append(block)
    marked = {i for i, line in enumerate(lines) if "[REDACTED:" in line}
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def paired(i: int) -> bool:
        near = range(max(0, i - _PAIR_LINES), min(len(lines), i + _PAIR_LINES + 1))
        return any(j in marked and blocks[j] == blocks[i] for j in near)

    spans = []
    line_of = 0
    for m in _ID_ASSIGNMENT.finditer(text):
        key, group = ("key", "value") if m.group("key") else ("tag", "tagvalue")
        words = name_words(m.group(key))
        if not words or words[-1] not in _ID_WORDS or not _id_like(words, m.group(group)):
            continue
        while starts[line_of + 1] <= m.start(group):
            line_of += 1
        if paired(line_of):
            spans.append((m.start(group), m.end(group)))
    if not spans:
        return text
    out, pos = [], 0
    for a, b in spans:
        out.append(text[pos:a] + "[REDACTED:KEY_ID]")
        counts["KEY_ID"] += 1
        found.setdefault(text[a:b], "KEY_ID")
        pos = b
    out.append(text[pos:])
    return "".join(out)
