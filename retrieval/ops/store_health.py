"""The store's health as a person reads it (the web page): its size (documents, chunks, conversations, facts,
bytes), the last ingests and their errors, the scrubber's redactions by kind (counts, never a secret), and the
last maintenance run. Counts are held to the scopes the caller may read; the database's size in bytes and the
maintenance run, which span every scope, only to a caller who reads every scope (`scopes` None)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import psycopg

from ..corpus import runs

_REDACTED = re.compile(r"\[REDACTED:([A-Z0-9_]{1,40})\]")


@dataclass
class StoreHealth:
    scopes: dict[str, dict[str, int]]  # scope -> documents, chunks, tokens
    ingests: list[runs.IngestRun]
    redactions_stored: dict[str, int]  # kind -> `[REDACTED:KIND]` markers in the chunks now
    redactions_ingested: dict[str, int]  # kind -> secrets replaced by the recorded ingest runs
    redactions_captured: dict[str, int]  # kind -> secrets replaced in captured exchanges
    bytes: dict[str, int] = field(default_factory=dict)  # table -> bytes on disk (every scope: admins)
    maintenance: dict | None = None  # the last run's report (every scope: admins)

    @property
    def redaction_kinds(self) -> list[str]:
        return sorted({*self.redactions_stored, *self.redactions_ingested, *self.redactions_captured})


def store_health(conn: psycopg.Connection, scopes: list[str] | None) -> StoreHealth:
    scoped = "(%(s)s::text[] IS NULL OR scope = ANY(%(s)s::text[]))"
    args = {"s": scopes}
    by_scope = {
        scope: {"documents": docs, "chunks": 0, "tokens": 0}
        for scope, docs in conn.execute(f"SELECT scope, count(*) FROM documents WHERE {scoped} GROUP BY scope", args)
    }
    for scope, n, tokens in conn.execute(
        f"SELECT scope, count(*), coalesce(sum(tokens), 0) FROM chunks WHERE {scoped} GROUP BY scope", args
    ):
        by_scope.setdefault(scope, {"documents": 0, "chunks": 0, "tokens": 0}).update(chunks=n, tokens=int(tokens))
    stored: Counter = Counter()
    for (text,) in conn.execute(f"SELECT text FROM chunks WHERE {scoped} AND strpos(text, '[REDACTED:') > 0", args):
        stored.update(_REDACTED.findall(text))
    ingested: Counter = Counter()
    for (counts,) in conn.execute(f"SELECT redactions FROM ingest_runs WHERE {scoped}", args):
        ingested.update({k: int(v) for k, v in counts.items()})
    captured: Counter = Counter()
    for (counts,) in conn.execute(f"SELECT redactions FROM captures WHERE {scoped} AND redactions <> '{{}}'", args):
        captured.update({k: int(v) for k, v in counts.items()})
    out = StoreHealth(
        dict(sorted(by_scope.items())),
        runs.recent(conn, scopes),
        dict(stored.most_common()),
        dict(ingested.most_common()),
        dict(captured.most_common()),
    )
    if scopes is None:
        out.bytes = {
            t: n
            for t, n in conn.execute(
                "SELECT relname, pg_total_relation_size(oid) FROM pg_class"
                " WHERE relname = ANY(%s) AND relkind = 'r' AND relnamespace = current_schema()::regnamespace",
                (["documents", "chunks", "chunk_terms", "queries", "query_candidates"],),
            )
        }
        row = conn.execute(
            "SELECT finished_at, seconds, report FROM maintenance_runs ORDER BY id DESC LIMIT 1"
        ).fetchone()
        out.maintenance = {"finished_at": row[0], "seconds": row[1], "report": row[2]} if row else None
    return out
