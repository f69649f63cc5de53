"""The ingest runs' record (migration 019): one row per run of any door (the command line, `POST /ingest`, the web
page), what it wrote, its errors (one line each) and its redaction counts (never a secret), for the page that
shows the store's health."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from .report import IngestReport

MAX_ERRORS = 20  # a run's errors kept (the first ones): a folder of 10,000 bad files is one row, not 10,000 lines


@dataclass(frozen=True)
class IngestRun:
    id: int
    finished_at: datetime
    door: str
    scope: str
    documents: int
    chunks: int
    errors: list[str]
    redactions: dict[str, int]


def record(conn: psycopg.Connection, door: str, scope: str, report: IngestReport) -> int:
    """Keep one run's row; its id."""
    (run_id,) = conn.execute(
        "INSERT INTO ingest_runs (door, scope, documents, chunks, errors, redactions)"
        " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
        (
            door,
            scope,
            report.documents_new + report.documents_updated,
            report.chunks_inserted,
            Jsonb(report.errors[:MAX_ERRORS]),
            Jsonb(dict(report.redactions)),
        ),
    ).fetchone()
    return run_id


def recent(conn: psycopg.Connection, scopes: list[str] | None, limit: int = 20) -> list[IngestRun]:
    """The last runs into `scopes` (None: every scope), newest first."""
    rows = conn.execute(
        "SELECT id, finished_at, door, scope, documents, chunks, errors, redactions FROM ingest_runs"
        " WHERE %s::text[] IS NULL OR scope = ANY(%s::text[]) ORDER BY id DESC LIMIT %s",
        (scopes, scopes, limit),
    ).fetchall()
    return [IngestRun(*r) for r in rows]
