"""The deployment log (docs/architecture.md, "Hot-swap protocol"), in Postgres: which selector version the services
must run and what each service did about it. `pai promote`/`rollback` and the deploy stage write it;
the running service (`serving/hotswap.py`) follows it.

Tables (migration 005): `selector_deployments` (what should run; append-only, the latest row wins)
and `selector_applies` (what each service did about it, with the announce -> serving latency).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from ..contracts.selection import current_name, current_record

CHANNEL = "pai_selector"
APP_NAME = "pai-serve"  # the listener's application_name: how `pai promote` sees running services


@dataclass(frozen=True)
class Deployment:
    id: int
    version: str
    record: dict
    action: str
    reason: str | None
    created_at: datetime


_COLS = "id, version, record, action, reason, created_at"


def _deployment(row) -> Deployment:
    """A row as named now (the first-stage order announced under its old name reads as it)."""
    return Deployment(row[0], current_name(row[1]), current_record(row[2]), *row[3:])


def foreign_store(record: dict, store: str) -> str | None:
    """Why a version record may not serve on store `store` (the database's `store_identity`): it was trained for
    another store (the deploy stage stamps `store`; a cascade's parts each). None for a record of this store, or
    one that names none (the first-stage order, a version registered before stores had ids)."""
    for r in (record, record.get("fast") or {}, record.get("slow") or {}):
        if r.get("store") is not None and r["store"] != store:
            return f"{record.get('version')} was trained for store {r['store']}, this is store {store}"
    return None


def announce(conn: psycopg.Connection, record: dict, action: str, reason: str | None = None) -> int:
    """Record the version the services must run and NOTIFY them (delivered at commit)."""
    with conn.transaction():
        (dep_id,) = conn.execute(
            "INSERT INTO selector_deployments (version, record, action, reason) VALUES (%s, %s, %s, %s) RETURNING id",
            (record["version"], Jsonb(record), action, reason),
        ).fetchone()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(dep_id)))
    return dep_id


def latest(conn: psycopg.Connection) -> Deployment | None:
    row = conn.execute(f"SELECT {_COLS} FROM selector_deployments ORDER BY id DESC LIMIT 1").fetchone()
    return _deployment(row) if row else None


def deployments(conn: psycopg.Connection, limit: int = 10) -> list[Deployment]:
    return [
        _deployment(r)
        for r in conn.execute(f"SELECT {_COLS} FROM selector_deployments ORDER BY id DESC LIMIT %s", (limit,))
    ]


def last_good(conn: psycopg.Connection, before_id: int) -> Deployment | None:
    """The newest deployment before `before_id` that a service applied successfully."""
    row = conn.execute(
        f"SELECT {', '.join('d.' + c for c in _COLS.split(', '))} FROM selector_deployments d "
        "WHERE d.id < %s AND EXISTS (SELECT 1 FROM selector_applies a WHERE a.deployment_id = d.id AND a.ok) "
        "ORDER BY d.id DESC LIMIT 1",
        (before_id,),
    ).fetchone()
    return _deployment(row) if row else None


def applies(conn: psycopg.Connection, deployment_id: int) -> list[dict]:
    rows = conn.execute(
        "SELECT service, ok, detail, swap_ms, applied_at FROM selector_applies WHERE deployment_id = %s ORDER BY id",
        (deployment_id,),
    ).fetchall()
    return [dict(zip(("service", "ok", "detail", "swap_ms", "applied_at"), r)) for r in rows]


def record_apply(conn: psycopg.Connection, deployment_id: int, service: str, ok: bool, detail: str) -> float:
    """What this service did about a deployment; returns announce -> now in ms (database clock)."""
    (ms,) = conn.execute(
        "INSERT INTO selector_applies (deployment_id, service, ok, detail, swap_ms) "
        "SELECT %s, %s, %s, %s, extract(epoch FROM clock_timestamp() - created_at) * 1000 "
        "FROM selector_deployments WHERE id = %s RETURNING swap_ms",
        (deployment_id, service, ok, detail, deployment_id),
    ).fetchone()
    return float(ms)


def listening_services(conn: psycopg.Connection) -> int:
    """Services currently listening for announcements (by their connection's application_name)."""
    (n,) = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s", (APP_NAME + ":%",)
    ).fetchone()
    return int(n)


def wait_for_applies(conn: psycopg.Connection, deployment_id: int, services: int, timeout_s: float) -> list[dict]:
    """Apply rows for a deployment, once `services` have answered or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = applies(conn, deployment_id)
        if len(rows) >= services or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)
