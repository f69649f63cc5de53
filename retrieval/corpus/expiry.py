"""Expiry: when a memory leaves the store. A document may carry `expires_at` (migration 018): set by `pai ingest
--expires`, else by the defaults in params.yaml `forget` (per source glob, then per scope, then `expiry_days`,
counted from when it was written). Search skips an expired document at once (`retrieval.query.search`); maintenance
forgets it, with every copy (`retrieval.ops.forget`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase

import psycopg

from ..params import ForgetParams, expiry_rules
from ..scopes import matches

_DAYS = re.compile(r"(\d{1,5})d")


class ExpiryError(ValueError):
    """An expiry that cannot be read: its one-line reason."""


def parse(value: str, now: datetime | None = None) -> datetime | None:
    """`30d` (days from now), an ISO date or time (UTC unless it says), or `never` -> when it expires (None: never)."""
    value = value.strip()
    now = now or datetime.now(UTC)
    if value == "never":
        return None
    if m := _DAYS.fullmatch(value):
        return now + timedelta(days=int(m.group(1)))
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ExpiryError(f"--expires {value[:40]!r}: give days (30d), a date (2027-01-31) or never") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def default_days(fp: ForgetParams, scope: str, source: str, path: str) -> int:
    """Days a document lives by the defaults: the first source glob matching its source or path, else the first scope
    rule matching its scope (a name or `name/*`), else `expiry_days`; 0 = never."""
    for glob, days in expiry_rules(fp.expiry_sources):
        if fnmatchcase(source, glob) or fnmatchcase(path, glob):
            return days
    for pattern, days in expiry_rules(fp.expiry_scopes):
        if matches(pattern, scope):
            return days
    return fp.expiry_days


def stamp_defaults(conn: psycopg.Connection, fp: ForgetParams) -> int:
    """Give every document without an expiry the one its defaults say (written_at + days); the number stamped."""
    if not (fp.expiry_days or fp.expiry_sources.strip() or fp.expiry_scopes.strip()):
        return 0
    rows = conn.execute(
        "SELECT id, scope, source, path, written_at FROM documents WHERE expires_at IS NULL ORDER BY id"
    ).fetchall()
    ids, whens = [], []
    for doc_id, scope, source, path, written in rows:
        days = default_days(fp, scope, source, path)
        if days:
            ids.append(doc_id)
            whens.append(written + timedelta(days=days))
    if ids:
        conn.execute(
            "UPDATE documents d SET expires_at = u.w FROM unnest(%s::bigint[], %s::timestamptz[]) AS u(id, w)"
            " WHERE d.id = u.id AND d.expires_at IS NULL",
            (ids, whens),
        )
    return len(ids)


def set_for_paths(conn: psycopg.Connection, paths: list[str], scope: str, when: datetime | None) -> int:
    """Set the expiry of the documents of `scope` read from `paths` (files, or every file under a folder); None:
    never. The number of documents."""
    dirs = [p.rstrip("/") + "/" for p in paths]
    return conn.execute(
        "UPDATE documents SET expires_at = %s WHERE scope = %s"
        " AND (path = ANY(%s) OR EXISTS (SELECT 1 FROM unnest(%s::text[]) AS u(dir) WHERE starts_with(path, u.dir)))",
        (when, scope, paths, dirs),
    ).rowcount
