"""Which scopes a caller may read and write. A bearer token is a `Grant`: read and write patterns over scope names
(`alice/notes`, `alice/*`, `*`; `retrieval.scopes`), the scope a request that names none uses (`default`), the
scopes shared with it (added to every read), and admin (every scope, and the admin routes).

Tokens come from two places. The scoped ones from the YAML file `PAI_TOKENS_FILE` names (secrets: never in
params.yaml), a list of entries such as

    - token: "a long random string"
      default: alice/notes        # the scope of a request that names none (default: `default`)
      read: ["alice/*"]           # patterns it may read (what it may write it may read too)
      write: ["alice/*"]          # patterns it may write (ingest, remember, capture, feedback)
      shared: ["team/handbook"]   # exact scopes every read of this token adds to its own
    - token: "another"
      admin: true

and the three unscoped ones of before (`PAI_READ_TOKEN`: reads every scope; `PAI_WRITE_TOKEN`: reads and writes
every scope; `PAI_ADMIN_TOKEN`: admin). On loopback a request without a known token is the box's owner: admin,
its default scope `default` (one user on one box sees what it saw before scopes: everything it stored, in
`default`). Beyond loopback every route but /health needs a token (`serving.auth`).
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from retrieval.scopes import DEFAULT, ScopeError, check, check_pattern, matches

TOKENS_FILE = "PAI_TOKENS_FILE"
ADMIN_TOKEN, WRITE_TOKEN, READ_TOKEN = "PAI_ADMIN_TOKEN", "PAI_WRITE_TOKEN", "PAI_READ_TOKEN"
MIN_TOKEN_CHARS = 16
_KEYS = {"token", "default", "read", "write", "shared", "admin"}


@dataclass(frozen=True)
class Grant:
    default: str = DEFAULT
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()
    admin: bool = False
    scoped: bool = True  # False: an unscoped environment token, or the loopback owner

    def may_read(self, scope: str) -> bool:
        return self.admin or any(matches(p, scope) for p in self.read + self.write)

    def may_write(self, scope: str) -> bool:
        return self.admin or any(matches(p, scope) for p in self.write)

    @property
    def writes(self) -> bool:
        return self.admin or bool(self.write)

    def reading(self, scope: str) -> list[str]:
        """The scopes a read in `scope` searches: it and those shared with this token."""
        return [scope] + [s for s in self.shared if s != scope and self.may_read(s)]


OWNER = Grant(admin=True, scoped=False)  # loopback without a token
_UNSCOPED = {
    READ_TOKEN: Grant(read=("*",), scoped=False),
    WRITE_TOKEN: Grant(read=("*",), write=("*",), scoped=False),
    ADMIN_TOKEN: OWNER,
}


def _entry(n: int, e: object) -> tuple[str, Grant]:
    """One entry of the tokens file; ValueError naming the entry (never its token)."""
    if not isinstance(e, dict) or set(e) - _KEYS:
        raise ValueError(f"entry {n}: a mapping of {', '.join(sorted(_KEYS))}")
    token = e.get("token")
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable():
        raise ValueError(f"entry {n}: token must be printable ASCII of at least {MIN_TOKEN_CHARS} characters")
    lists = {}
    for key in ("read", "write", "shared"):
        value = e.get(key, [])
        if not isinstance(value, list):
            raise ValueError(f"entry {n}: {key} must be a list of scope patterns")
        try:
            lists[key] = tuple((check if key == "shared" else check_pattern)(p) for p in value)
        except ScopeError as why:
            raise ValueError(f"entry {n}: {key}: {why}") from None
    try:
        grant = Grant(check(e.get("default", DEFAULT)), admin=e.get("admin") is True, **lists)
    except ScopeError as why:
        raise ValueError(f"entry {n}: default: {why}") from None
    if not grant.may_read(grant.default):
        raise ValueError(f"entry {n}: its default scope {grant.default} is not among the scopes it may read")
    return token, grant


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> tuple[tuple[str, Grant], ...]:
    try:
        entries = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{TOKENS_FILE} {path}: {str(e).splitlines()[0]}") from None
    entries = [] if entries is None else entries  # an empty file: no scoped token
    if not isinstance(entries, list):
        raise ValueError(f"{TOKENS_FILE} {path}: a list of token entries")
    try:
        out = tuple(_entry(n, e) for n, e in enumerate(entries, start=1))
    except ValueError as e:
        raise ValueError(f"{TOKENS_FILE} {path}: {e}") from None
    if len({t for t, _ in out}) != len(out):
        raise ValueError(f"{TOKENS_FILE} {path}: a token appears twice")
    return out


def tokens() -> list[tuple[str, Grant]]:
    """Every token the service knows and its grant: the scoped file's (read again when it changes), then the
    unscoped environment ones. ValueError (one line) for a file that does not read."""
    out = []
    path = os.environ.get(TOKENS_FILE)
    if path:
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError as e:
            raise ValueError(f"{TOKENS_FILE} {path}: {e.strerror}") from None
        out += _load(path, mtime)
    return out + [(t, g) for name, g in _UNSCOPED.items() if (t := os.environ.get(name))]


def grant_for(authorization: bytes) -> Grant | None:
    """The grant of the bearer token in an Authorization header (compared in constant time, as bytes), or None."""
    found = None
    for token, grant in tokens():
        if hmac.compare_digest(authorization, f"Bearer {token}".encode()) and found is None:
            found = grant
    return found
