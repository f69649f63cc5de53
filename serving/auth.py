"""Who may call the service. On loopback every route is open. Beyond it every route but /health needs a
bearer token: the read token, or the write or admin one (a read of a memory layer is the leak); the write
routes (ingest, feedback, capture) need the write or admin token, the admin routes the admin one.
`check_exposure` refuses to start beyond loopback with no token set; `TokenGate` (ASGI middleware) checks
the read side before a body is read; `admin_only` and `writers_only` make the route dependencies that
check the rest. Tokens are compared in constant time, as bytes.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Callable

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .service import Service

ADMIN_TOKEN, WRITE_TOKEN, READ_TOKEN = "PAI_ADMIN_TOKEN", "PAI_WRITE_TOKEN", "PAI_READ_TOKEN"
OPEN_PATHS = frozenset({"/health"})  # beyond loopback, the only route without a token


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str) -> None:
    """Beyond loopback every route but /health needs a token: refuse to serve there without one."""
    if not is_loopback(host) and not any(os.environ.get(t) for t in (READ_TOKEN, WRITE_TOKEN, ADMIN_TOKEN)):
        raise ValueError(
            f"listening on {host}, beyond loopback, needs {READ_TOKEN}, {WRITE_TOKEN} or {ADMIN_TOKEN} set: "
            "anyone who can reach it could otherwise read the whole memory, ingest notes and post feedback"
        )


class TokenGate:
    """Beyond loopback every route but /health needs a bearer token: the read token, or the write or admin one
    (a read of a memory layer is the leak). The write and admin routes check their own token after this."""

    def __init__(self, app, service: Service):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or is_loopback(self.service.host):
            return await self.app(scope, receive, send)
        tokens = [t for t in (os.environ.get(n) for n in (READ_TOKEN, WRITE_TOKEN, ADMIN_TOKEN)) if t]
        if not tokens:  # check_exposure refuses to start so; the environment changed under us
            why = (
                f"the service listens on {self.service.host}, beyond loopback, with no token: "
                f"set {READ_TOKEN}, {WRITE_TOKEN} or {ADMIN_TOKEN}"
            )
            return await JSONResponse({"error": why}, 403)(scope, receive, send)
        got = dict(scope["headers"]).get(b"authorization", b"")
        if not any(hmac.compare_digest(got, f"Bearer {t}".encode()) for t in tokens):
            why = f"missing or wrong bearer token ({READ_TOKEN}, {WRITE_TOKEN} or {ADMIN_TOKEN})"
            return await JSONResponse({"error": why}, 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        await self.app(scope, receive, send)


def admin_only(service: Service) -> Callable[[Request], None]:
    """The admin routes' dependency: PAI_ADMIN_TOKEN when it is set; without it, loopback only."""

    def require_admin(request: Request) -> None:
        token = os.environ.get(ADMIN_TOKEN)
        if token:
            if not _bearer_is(request, token):
                raise StarletteHTTPException(401, "admin route: missing or wrong bearer token (PAI_ADMIN_TOKEN)")
        elif not is_loopback(service.host):
            raise StarletteHTTPException(
                403, f"admin routes are off: the service listens on {service.host}; set PAI_ADMIN_TOKEN"
            )

    return require_admin


def writers_only(service: Service) -> Callable[[Request], None]:
    """The write routes' dependency (ingest, feedback, capture)."""

    def require_writer(request: Request) -> None:
        """Writes (ingest, feedback): open on loopback; beyond it, PAI_WRITE_TOKEN or PAI_ADMIN_TOKEN."""
        if is_loopback(service.host):
            return
        tokens = [t for t in (os.environ.get(WRITE_TOKEN), os.environ.get(ADMIN_TOKEN)) if t]
        if not tokens:  # check_exposure refuses to start so; the environment changed under us
            raise StarletteHTTPException(
                403, f"writes are off: the service listens on {service.host}; set {WRITE_TOKEN}"
            )
        if not any(_bearer_is(request, t) for t in tokens):
            raise StarletteHTTPException(
                401, f"write route: missing or wrong bearer token ({WRITE_TOKEN} or {ADMIN_TOKEN})"
            )

    return require_writer


def _bearer_is(request: Request, token: str) -> bool:
    """Compare as bytes: a header may hold any byte (latin-1 to Starlette), a str compare raises on non-ASCII."""
    got = request.headers.get("authorization", "").encode("latin-1")
    return hmac.compare_digest(got, f"Bearer {token}".encode())
