"""The other half of a credential pair, once its secret is redacted: the public identifier that goes with it.

- an id-ish name's value (an access key id, a client id, a role id, a consumer key, a user name) in the same block
  as a marker, the name written as code (`key_id`, `clientId`) or as a label of words (`Project ID:`, `Key ID:`);
- a .netrc's `login` beside its `password`;
- an id named in a sentence ("the key id is …", "client ID: …") in the same block as a marker;
- a UUID in the same block as a marker (an organisation, project, tenant or workspace id beside its key), unless
  named for what is not a credential's half (a request, a trace, a commit);
- the user in a URL's userinfo whose password was redacted, and the account or user of a connection string
  whose key or password was (`AccountName=`, `User ID=`, `Uid=`, `SharedAccessKeyName=`).
"""

from __future__ import annotations

import re
from collections import Counter

from .names import name_words
from .values import CODE_VALUE, REDACTED

_PAIR_LINES = 3  # an id within this many lines of a redacted secret, with no blank line between, is its pair
# the last word of a name for the public half of a credential pair
_ID_WORDS = {"id", "sid", "uid", "guid", "key", "user", "username", "login", "account", "tenant", "principal"}
_USER_NAME = re.compile(r"[\w.@+-]{2,}")
_ID_ASSIGNMENT = re.compile(  # `name = value`, `"name": "value"`, `name: value`, `<name>value</name>`, `Key ID: v`
    r"""(?<![\w.])["']?(?P<key>[A-Za-z_][\w.-]{0,60}?)["']?[ \t]*(?::=|=>|=|:)[ \t]*["']?(?P<value>[\w.@+/=:-]{3,200}?)["']?(?=[\s,;}\])&]|$)"""
    r"""|<(?P<tag>[A-Za-z_][\w.-]{0,60})>(?P<tagvalue>[^<>\s]{3,200})</(?P=tag)>"""
    r"""|^[ \t]*(?P<label>[A-Za-z][\w.-]{0,30}(?:[ \t][A-Za-z][\w.-]{0,30}){1,3}):[ \t]*(?P<labelvalue>[\w.@+/=-]{3,200})[ \t]*$""",
    re.M,
)
_UUID = re.compile(r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])")
# words before a UUID that name it as something other than a credential's half
_NOT_PARTNER = {
    "request",
    "req",
    "trace",
    "span",
    "correlation",
    "commit",
    "build",
    "run",
    "job",
    "event",
    "message",
    "msg",
    "transaction",
    "txn",
    "checksum",
    "hash",
    "digest",
    "etag",
    "nonce",
    "idempotency",
}
_PROSE_ID = re.compile(  # "the key id is X", "client ID: X", "account id X" in a sentence
    r"(?i)\b(?:key|client|account|app|application|tenant|project|org|organi[sz]ation|access\s+key)[ \t]+id"
    r"(?:[ \t]+(?:is|was|=|:)|:)?[ \t]+(?P<value>[A-Za-z0-9][\w.@+/=-]{7,199})(?<![.,;:])"
)
_NETRC_LOGIN = re.compile(  # `login X` on its own line, or `machine H login X password Y`
    r"(?m)(?:^[ \t]*|\bmachine[ \t]+\S+[ \t]+)login[ \t]+(?P<value>[\w.@+-]{2,200})(?=[ \t]*$|[ \t]+password\b)"
)
_URL_USER = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(?P<value>[^\s:/@\[\]]+):\[REDACTED:[A-Z0-9_]+\]@")
_CONNECTION_ID = re.compile(  # the account or user part of a `;`-separated connection string
    r"(?i)(?<![\w ])(?:AccountName|User[ \t]?ID|UID|User(?:[ \t]?Name)?|SharedAccessKeyName|Login)[ \t]*=[ \t]*"
    r"(?P<value>[^;\"'\s]{2,200})"
)


def _id_like(name: list[str], value: str) -> bool:
    if REDACTED.search(value) or value.lower() in ("none", "null", "true", "false"):
        return False
    if name[-1] in ("user", "username", "login"):  # bob.smith reads as code (an attribute) but is a name here
        return _USER_NAME.fullmatch(value) is not None
    if CODE_VALUE.match(value):
        return False
    return len(value) >= 8 and (any(c.isdigit() for c in value) or len(value) >= 16)


def redact_pair_ids(text: str, found: dict[str, str], counts: Counter) -> str:
    """Each partner of a marker: an id-ish name's value or a UUID within `_PAIR_LINES` lines of it in the same
    block (no blank line between), a URL's user, a connection string's account."""
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

    def line_of(pos: int) -> int:
        lo, hi = 0, len(lines) - 1  # the last line start at or before pos
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if starts[mid] <= pos else (lo, mid - 1)
        return lo

    def paired(pos: int) -> bool:
        i = line_of(pos)
        near = range(max(0, i - _PAIR_LINES), min(len(lines), i + _PAIR_LINES + 1))
        return any(j in marked and blocks[j] == blocks[i] for j in near)

    spans: dict[int, tuple[int, str]] = {}  # start -> (end, kind)
    for m in _ID_ASSIGNMENT.finditer(text):
        key, group = next(
            (k, g) for k, g in (("key", "value"), ("tag", "tagvalue"), ("label", "labelvalue")) if m.group(k)
        )
        words = name_words(m.group(key))
        if not words or words[-1] not in _ID_WORDS or _NOT_PARTNER & set(words):  # request_id: no pair's half
            continue
        if _id_like(words, m.group(group)) and paired(m.start(group)):
            spans[m.start(group)] = (m.end(group), "KEY_ID")
    for m in _UUID.finditer(text):
        before = text[max(0, m.start() - 40, text.rfind("\n", 0, m.start()) + 1) : m.start()]
        if m.start() not in spans and not _NOT_PARTNER & set(name_words(before)) and paired(m.start()):
            spans[m.start()] = (m.end(), "KEY_ID")
    for m in _PROSE_ID.finditer(text):
        if _id_like(["id"], m.group("value")) and paired(m.start("value")):
            spans.setdefault(m.start("value"), (m.end("value"), "KEY_ID"))
    for m in _NETRC_LOGIN.finditer(text):
        if paired(m.start("value")):
            spans.setdefault(m.start("value"), (m.end("value"), "KEY_ID"))
    for m in _URL_USER.finditer(text):
        spans[m.start("value")] = (m.end("value"), "USER")
    for m in _CONNECTION_ID.finditer(text):
        line = lines[line_of(m.start())]
        if ";" in line and "[REDACTED:" in line and not REDACTED.search(m.group("value")):
            spans.setdefault(m.start("value"), (m.end("value"), "KEY_ID"))
    if not spans:
        return text
    out, pos = [], 0
    for a in sorted(spans):
        b, kind = spans[a]
        if a < pos:
            continue
        out.append(text[pos:a] + f"[REDACTED:{kind}]")
        counts[kind] += 1
        found.setdefault(text[a:b], kind)
        pos = b
    out.append(text[pos:])
    return "".join(out)
