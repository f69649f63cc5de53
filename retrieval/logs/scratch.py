"""A scratch query log: a lab run (`pai lab loop report`) serves and records its traffic in tables of its own,
so the user's feedback log, learned answers, pulls and maintenance never see it, and nothing of the user's
is deleted when the run cleans up.

`scratch_log` creates a schema `pai_lab_<hex>` holding empty copies of the log's tables (`LOG_TABLES`: their
columns, defaults, checks and indexes, `LIKE ... INCLUDING ALL`; ids still come from the user's sequences, so
they never collide) and yields a connection string whose search_path puts that schema first. A service, a
replay and a pull given that string write and read the lab's queries, candidates and learned answers there,
and read everything else (the chunks, their vectors and terms) from the user's schema. The schema is dropped
on the way out, however the run ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from retrieval.db import DatabaseError, connect, database_url, first_line

LOG_TABLES = ("queries", "query_candidates", "learned_qa")  # what serving a query and its feedback write
PREFIX = "pai_lab_"


@contextmanager
def scratch_log(url: str | None = None) -> Iterator[str]:
    """A connection string (to the database of `url`, default `database_url()`) whose query log is a fresh,
    empty scratch schema, dropped on exit."""
    url = url or database_url()
    name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
    with connect(url) as conn:
        # the schema that holds the user's log: its name for SQL, and quoted for search_path
        home, quoted = conn.execute(
            "SELECT n.nspname, quote_ident(n.nspname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.oid = 'queries'::regclass"
        ).fetchone()
        try:
            with conn.transaction():
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
                for table in LOG_TABLES:
                    conn.execute(
                        sql.SQL("CREATE TABLE {}.{} (LIKE {}.{} INCLUDING ALL)").format(
                            sql.Identifier(name), sql.Identifier(table), sql.Identifier(home), sql.Identifier(table)
                        )
                    )
        except psycopg.errors.InsufficientPrivilege as e:
            raise DatabaseError(
                f"{first_line(e)}: a lab run keeps its traffic in a scratch schema, and this role may not create one"
                " (GRANT CREATE ON DATABASE to it, or run the lab on the embedded default)"
            ) from None
    options = conninfo_to_dict(url).get("options") or ""
    try:
        yield make_conninfo(url, options=f"{options} -c search_path={name},{quoted}".strip())
    finally:
        with connect(url) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
