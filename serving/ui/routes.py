"""The page's routes, put together: one router under `/ui`, its sessions kept in this process."""

from __future__ import annotations

from fastapi import APIRouter

from ..service import Service
from .actions import write_routes
from .pages import read_routes
from .session import Sessions


def ui_router(service: Service) -> APIRouter:
    router, sessions = APIRouter(), Sessions()
    read_routes(router, service, sessions)
    write_routes(router, service, sessions)
    return router
