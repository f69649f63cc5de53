"""Who may call the service. On loopback every route is open. Beyond it every route but /health needs a
bearer token: the read token, or the write or admin one (a read of a memory layer is the leak); the write
routes (ingest, feedback, capture) need the write or admin token, the admin routes the admin one. A scoped token
(`serving.grants`, the file `PAI_TOKENS_FILE` names) is held to its scopes on loopback too: `caller` says which
scopes a request may read and write, and the routes check each scope they touch.
The web page (`/ui`) passes the gate and checks its own callers against the same tokens (a login that sets a
cookie, CSRF on every write: `serving.ui.session`).
`check_exposure` refuses to start beyond loopback with no token set; `TokenGate` (ASGI middleware) checks
the read side before a body is read; `admin_only` and `writers_only` make the route dependencies that
check the rest. Tokens are compared in constant time, as bytes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .grants import ADMIN_TOKEN, OWNER, READ_TOKEN, TOKENS_FILE, WRITE_TOKEN, Grant, grant_for, tokens
from .service import Service

OPEN_PATHS = frozenset({"/health"})  # beyond loopback, the only route without a token
UI_PATHS = "/ui"  # the web page checks its own callers (a login that sets a cookie: serving/ui/session.py)
_NAMES = f"{READ_TOKEN}, {WRITE_TOKEN}, {ADMIN_TOKEN} or a token of {TOKENS_FILE}"


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str) -> None:
    """Beyond loopback every route but /health needs a token: refuse to serve there without one."""
    if not is_loopback(host) and not tokens():
        raise ValueError(
            f"listening on {host}, beyond loopback, needs {_NAMES} set: "
            "anyone who can reach it could otherwise read the whole memory, ingest notes and post feedback"
        )


class TokenGate:
    """Beyond loopback every route but /health needs a bearer token: the read token, or the write or admin one
    (a read of a memory layer is the leak). The write and admin routes check their own token after this."""

    def __init__(self, app, service: Service):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        page = path == UI_PATHS or path.startswith(UI_PATHS + "/")
        if scope["type"] != "http" or path in OPEN_PATHS or page or is_loopback(self.service.host):
            return await self.app(scope, receive, send)
        try:
            known = tokens()
            grant = grant_for(dict(scope["headers"]).get(b"authorization", b""))
        except ValueError as e:  # the tokens file changed under us and no longer reads
            return await JSONResponse({"error": str(e)}, 503)(scope, receive, send)
        if not known:  # check_exposure refuses to start so; the environment changed under us
            why = f"the service listens on {self.service.host}, beyond loopback, with no token: set {_NAMES}"
            return await JSONResponse({"error": why}, 403)(scope, receive, send)
        if grant is None:
            why = f"missing or wrong bearer token ({_NAMES})"
            return await JSONResponse({"error": why}, 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        await self.app(scope, receive, send)


def caller(service: Service) -> Callable[[Request], Grant]:
    """The dependency that says what a request may touch: a scoped token's grant, wherever it comes from; beyond
    loopback an unscoped token's (read, write, admin on every scope); on loopback otherwise the owner's (admin)."""

    def grant_of(request: Request) -> Grant:
        grant = grant_for(request.headers.get("authorization", "").encode("latin-1"))
        if grant is not None and (grant.scoped or not is_loopback(service.host)):
            return grant
        if is_loopback(service.host):
            return OWNER
        raise StarletteHTTPException(401, f"missing or wrong bearer token ({_NAMES})")

    return grant_of


def admin_only(service: Service) -> Callable[[Request], None]:
    """The admin routes' dependency: an admin token when one is set; without one, loopback only."""

    def require_admin(request: Request) -> None:
        admins = [t for t, g in tokens() if g.admin]
        if admins:
            grant = grant_for(request.headers.get("authorization", "").encode("latin-1"))
            if grant is None or not grant.admin:
                raise StarletteHTTPException(401, f"admin route: missing or wrong bearer token ({ADMIN_TOKEN})")
        elif not is_loopback(service.host):
            raise StarletteHTTPException(
                403, f"admin routes are off: the service listens on {service.host}; set {ADMIN_TOKEN}"
            )

    return require_admin


def writers_only(service: Service) -> Callable[[Request], None]:
    """The write routes' dependency (ingest, feedback, capture): open on loopback (a scoped token is still held to
    its scopes by the route); beyond it, a token that may write somewhere."""

    def require_writer(request: Request) -> None:
        if is_loopback(service.host):
            return
        if not any(g.writes for _, g in tokens()):  # check_exposure refuses to start so; the environment changed
            raise StarletteHTTPException(
                403, f"writes are off: the service listens on {service.host}; set {WRITE_TOKEN}"
            )
        grant = grant_for(request.headers.get("authorization", "").encode("latin-1"))
        if grant is None or not grant.writes:
            raise StarletteHTTPException(
                401, f"write route: missing or wrong bearer token ({WRITE_TOKEN}, {ADMIN_TOKEN} or a scoped one)"
            )

    return require_writer
