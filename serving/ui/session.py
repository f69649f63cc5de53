"""Who uses the page. On loopback the box's owner needs no login (admin, as the API); beyond it a person logs in
with a token (the read, write or admin one, or a scoped one of `PAI_TOKENS_FILE`), and the session cookie stands
for it: the token is looked up again on every request, so a token taken out of the file logs its sessions out.
A scoped token is held to its scopes on loopback too. A bearer header works as on the API.

Every visitor gets a session (an opaque random id in an HttpOnly, SameSite=Strict cookie) with its CSRF token;
every write carries that token in its form and is refused without it, so no other site can post through a
browser that holds the cookie (on loopback, where the owner needs no login, this is what keeps a hostile page
from forgetting a memory)."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

from fastapi import Request

from ..auth import is_loopback
from ..grants import OWNER, Grant, grant_for

COOKIE = "pai_ui"
SESSION_S = 12 * 3600  # a session's life
MAX_SESSIONS = 10_000  # of each kind, anonymous and logged in; the oldest go first past this


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    token: str | None = None  # the token it logged in with (kept in this process only)
    started: float = field(default_factory=time.monotonic)


class Sessions:
    """The sessions of this process: anonymous ones (a first visit, the login form) and logged-in ones kept apart,
    each bounded, so a flood of anonymous visits evicts only anonymous sessions, never a person's login."""

    def __init__(self):
        self._anon: dict[str, Session] = {}
        self._logged: dict[str, Session] = {}
        self._lock = threading.Lock()

    def get(self, sid: str | None) -> Session | None:
        with self._lock:
            for table in (self._logged, self._anon):
                s = table.get(sid or "")
                if s is not None and time.monotonic() - s.started > SESSION_S:
                    del table[sid]
                    return None
                if s is not None:
                    return s
            return None

    def new(self, token: str | None = None) -> tuple[str, Session]:
        sid, s = secrets.token_urlsafe(32), Session(token=token)
        table = self._anon if token is None else self._logged
        with self._lock:
            while len(table) >= MAX_SESSIONS:
                table.pop(next(iter(table)))
            table[sid] = s
        return sid, s

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._anon.pop(sid or "", None)
            self._logged.pop(sid or "", None)


def bearer(token: str) -> bytes:
    return f"Bearer {token}".encode("utf-8", "replace")


def grant_of(request: Request, session: Session | None, host: str) -> Grant | None:
    """What this request may touch: the bearer header's grant, else the session's token's, else on loopback the
    owner's; None: beyond loopback with no valid token (the page asks for a login)."""
    header = request.headers.get("authorization", "").encode("latin-1", "replace")
    grant = grant_for(header) if header else None
    if grant is None and session is not None and session.token is not None:
        grant = grant_for(bearer(session.token))
    if grant is not None and (grant.scoped or not is_loopback(host)):
        return grant
    return OWNER if is_loopback(host) else None


def csrf_ok(session: Session | None, sent: str | None) -> bool:
    return session is not None and bool(sent) and hmac.compare_digest(session.csrf.encode(), (sent or "").encode())


@dataclass
class Visit:
    """One request's session (made on a first visit) and grant (None: beyond loopback, not logged in)."""

    sid: str
    session: Session
    new: bool
    grant: Grant | None


def visit(request: Request, sessions: Sessions, host: str) -> Visit:
    sid = request.cookies.get(COOKIE)
    session = sessions.get(sid)
    new = session is None
    if new:
        sid, session = sessions.new()
    return Visit(sid, session, new, grant_of(request, session, host))


def keep(response, v: Visit, request: Request):
    """The response, with the session cookie set when the visit made one."""
    if v.new:
        response.set_cookie(
            COOKIE,
            v.sid,
            max_age=SESSION_S,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    return response
