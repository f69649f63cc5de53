"""One logged query as a person reads it (the web page): the query, which selector served it and how, the answer
and what it cited; every candidate the log holds with the staging file's view of it (rank, scores, source, date)
and why it is in or out of the context; the chunks' text read from the store now (a chunk forgotten or changed
since reads as gone, whatever the staging file still says). Queries of other scopes read as absent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from ..contracts.selection import current_name
from ..query import staging
from .citations import cited_ranks


@dataclass(frozen=True)
class CandidateView:
    rank: int
    chunk_id: int
    score: float
    source: str | None  # None: gone from the store and absent from the staging file
    date: str | None
    vector_rank: int | None
    keyword_rank: int | None
    why: str  # in context, preview, not picked, below the threshold ...
    shown: bool | None
    served_rank: int | None
    used: bool | None
    rated_at: datetime | None
    text: str | None  # the chunk's text now; None: forgotten or changed since


@dataclass(frozen=True)
class QueryView:
    id: int
    text: str
    scope: str
    asked_at: datetime
    selector_version: str
    picked_by: str | None
    selection_status: str | None
    threshold: float | None
    staging_path: str | None
    staging_readable: bool
    answer: str | None
    rating: int | None
    trial_id: int | None
    cited: list[int]  # the [n] of the answer, in order
    candidates: list[CandidateView]  # by rank

    @property
    def context(self) -> list[CandidateView]:
        return sorted((c for c in self.candidates if c.shown), key=lambda c: (c.served_rank or 0, c.rank))


def _why(row: dict, listed: bool, threshold: float | None) -> str:
    if row["shown"]:
        return f"in context (#{row['served_rank']})" if row["served_rank"] else "in context"
    if row["previewed"]:
        return "preview (listed after the context)" + (", read whole" if row["expanded"] else "")
    if not listed:
        return "below the threshold: never enters the context"
    if threshold is not None and row["score"] < threshold:
        return "below the threshold, kept to the floor; not picked"
    return "above the threshold; not picked by the selector"


def recent(conn: psycopg.Connection, scopes: list[str] | None, limit: int = 20) -> list[tuple]:
    """The latest queries, each served by the version as named now (`current_name`)."""
    rows = conn.execute(
        "SELECT id, text, scope, created_at, selector_version, answer IS NOT NULL AS answered FROM queries"
        " WHERE %s::text[] IS NULL OR scope = ANY(%s::text[]) ORDER BY id DESC LIMIT %s",
        (scopes, scopes, limit),
    ).fetchall()
    return [(*r[:4], current_name(r[4]), *r[5:]) for r in rows]


def query_view(conn: psycopg.Connection, query_id: int, scopes: list[str] | None) -> QueryView | None:
    cur = conn.cursor(row_factory=dict_row)
    q = cur.execute(
        "SELECT id, text, scope, created_at, selector_version, picked_by, selection_status, threshold, staging_path,"
        " answer, rating, trial_id FROM queries WHERE id = %s AND (%s::text[] IS NULL OR scope = ANY(%s::text[]))",
        (query_id, scopes, scopes),
    ).fetchone()
    if q is None:
        return None
    rows = cur.execute(
        """SELECT c.rank, c.chunk_id, c.score, c.shown, c.served_rank, c.previewed, c.expanded, c.used, c.rated_at,
                  k.text, k.source, d.written_at
           FROM query_candidates c LEFT JOIN chunks k ON k.id = c.chunk_id AND k.content_hash = c.content_hash
           LEFT JOIN documents d ON d.id = k.document_id
           WHERE c.query_id = %s ORDER BY c.rank""",
        (query_id,),
    ).fetchall()
    listed, readable = {}, False
    if q["staging_path"]:
        try:
            sf = staging.read(Path(q["staging_path"]))
            listed, readable = {c.rank: c for c in sf.candidates}, True
        except (OSError, ValueError):
            pass  # expired, moved, or not a staging file: the log alone
    out = []
    for r in rows:
        s = listed.get(r["rank"])
        out.append(
            CandidateView(
                rank=r["rank"],
                chunk_id=r["chunk_id"],
                score=r["score"],
                source=r["source"],
                date=r["written_at"].isoformat() if r["written_at"] else None,
                vector_rank=s.vector_rank if s else None,
                keyword_rank=s.keyword_rank if s else None,
                why=_why(r, s is not None or not readable, q["threshold"]),
                shown=r["shown"],
                served_rank=r["served_rank"],
                used=r["used"],
                rated_at=r["rated_at"],
                text=r["text"],
            )
        )
    return QueryView(
        **{k: q[k] for k in ("id", "text", "scope", "picked_by", "selection_status")},
        selector_version=current_name(q["selector_version"]),  # served by the first-stage order: its old name too
        asked_at=q["created_at"],
        threshold=q["threshold"],
        staging_path=q["staging_path"],
        staging_readable=readable,
        answer=q["answer"],
        rating=q["rating"],
        trial_id=q["trial_id"],
        cited=cited_ranks(q["answer"] or ""),
        candidates=out,
    )
