"""What the memory holds, as a person browses it (the web page): documents by source, scope, kind (note,
conversation, captured fact) and date, found by words; one document with its chunks; one chunk with its
provenance, its dates and its history in the log (each query that had it as a candidate: served, cited, rated).
Every read is held to the scopes the caller may read; a row of another scope reads as absent."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import psycopg
from psycopg.rows import class_row

from ..contracts.selection import current_name

KINDS = ("note", "conversation", "fact")
# a document's kind as the page names it: a captured fact; a conversation (its first chunk opens with the dated
# `[date · session · speakers]` line retrieval.dialogue writes); else a note
KIND_SQL = """CASE WHEN d.kind = 'fact' THEN 'fact'
    WHEN EXISTS (SELECT 1 FROM chunks k WHERE k.document_id = d.id AND k.ord = 0
                 AND k.text ~ '^\\[[^]\\n]*·[^]\\n]*\\]') THEN 'conversation'
    ELSE 'note' END"""
MAX_WORDS = 200  # characters of a search's words; longer is cut


@dataclass(frozen=True)
class DocumentRow:
    id: int
    source: str
    path: str
    scope: str
    kind: str
    n_chunks: int
    written_at: datetime
    updated_at: datetime
    versions: int  # superseded versions kept
    capture_id: int | None
    scrubbed_with: str | None
    preview: str  # the first chunk's first characters


@dataclass(frozen=True)
class ChunkRow:
    id: int
    document_id: int
    source: str
    scope: str
    ord: int
    heading: str | None
    parent_heading: str | None
    start_line: int
    end_line: int
    text: str
    tokens: int
    created_at: datetime
    written_at: datetime
    near_chunk_id: int | None
    near_score: float | None


@dataclass(frozen=True)
class Event:
    """One query that had the chunk as a candidate: what it was (rank, shown, previewed, expanded, used), when."""

    query_id: int
    query: str
    asked_at: datetime
    selector_version: str
    rank: int
    served_rank: int | None
    shown: bool | None
    previewed: bool | None
    expanded: bool
    used: bool | None  # cited / labelled used (true), ignored (false), unlabelled (None)
    rated_at: datetime | None  # a person's label, when one was set
    rating: int | None  # the query's own +1 / -1


_DOC_COLS = f"""d.id, d.source, d.path, d.scope, {KIND_SQL} AS kind, d.n_chunks, d.written_at, d.updated_at,
    (SELECT count(*) FROM document_versions v WHERE v.document_id = d.id)::int AS versions, d.capture_id,
    d.scrubbed_with,
    coalesce((SELECT left(k.text, 240) FROM chunks k WHERE k.document_id = d.id ORDER BY k.ord LIMIT 1), '') AS preview"""


def documents(
    conn: psycopg.Connection,
    scopes: list[str] | None,
    words: str = "",
    source: str = "",
    kind: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
    offset: int = 0,
    limit: int = 50,
) -> tuple[list[DocumentRow], int]:
    """One page of the documents in `scopes` (None: all) matching the filters, newest written first; and how many
    match. `words`: full text over the chunks; `source`: a part of the source's name."""
    where, args = ["(%(scopes)s::text[] IS NULL OR d.scope = ANY(%(scopes)s::text[]))"], {"scopes": scopes}
    if words.strip():
        where.append(
            "d.id IN (SELECT k.document_id FROM chunk_terms t JOIN chunks k ON k.id = t.chunk_id"
            " WHERE t.tsv @@ websearch_to_tsquery('english', %(words)s)"
            " AND (%(scopes)s::text[] IS NULL OR t.scope = ANY(%(scopes)s::text[])))"
        )
        args["words"] = words[:MAX_WORDS]
    if source:
        where.append("strpos(lower(d.source), lower(%(source)s)) > 0")
        args["source"] = source[:MAX_WORDS]
    if kind in KINDS:
        where.append(f"({KIND_SQL}) = %(kind)s")
        args["kind"] = kind
    if since is not None:
        where.append("d.written_at >= %(since)s")
        args["since"] = since
    if until is not None:
        where.append("d.written_at < %(until)s")
        args["until"] = until
    cond = " AND ".join(where)
    (total,) = conn.execute(f"SELECT count(*) FROM documents d WHERE {cond}", args).fetchone()
    cur = conn.cursor(row_factory=class_row(DocumentRow))
    rows = cur.execute(
        f"SELECT {_DOC_COLS} FROM documents d WHERE {cond} ORDER BY d.written_at DESC, d.id DESC"
        " LIMIT %(limit)s OFFSET %(offset)s",
        args | {"limit": limit, "offset": offset},
    ).fetchall()
    return rows, total


def document(conn: psycopg.Connection, document_id: int, scopes: list[str] | None) -> DocumentRow | None:
    cur = conn.cursor(row_factory=class_row(DocumentRow))
    return cur.execute(
        f"SELECT {_DOC_COLS} FROM documents d WHERE d.id = %s AND (%s::text[] IS NULL OR d.scope = ANY(%s::text[]))",
        (document_id, scopes, scopes),
    ).fetchone()


_CHUNK_COLS = """c.id, c.document_id, c.source, c.scope, c.ord, c.heading, c.parent_heading, c.start_line, c.end_line,
    c.text, c.tokens, c.created_at, d.written_at, c.near_chunk_id, c.near_score"""


def chunks_of(conn: psycopg.Connection, document_id: int) -> list[ChunkRow]:
    cur = conn.cursor(row_factory=class_row(ChunkRow))
    return cur.execute(
        f"SELECT {_CHUNK_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.document_id = %s ORDER BY c.ord",
        (document_id,),
    ).fetchall()


def chunk(conn: psycopg.Connection, chunk_id: int, scopes: list[str] | None) -> ChunkRow | None:
    cur = conn.cursor(row_factory=class_row(ChunkRow))
    return cur.execute(
        f"SELECT {_CHUNK_COLS} FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.id = %s AND (%s::text[] IS NULL OR c.scope = ANY(%s::text[]))",
        (chunk_id, scopes, scopes),
    ).fetchone()


def history(conn: psycopg.Connection, chunk_id: int, scopes: list[str] | None, limit: int = 100) -> list[Event]:
    """The queries (of `scopes`) that had the chunk as a candidate, newest first: served, cited, rated."""
    cur = conn.cursor(row_factory=class_row(Event))
    events = cur.execute(
        """SELECT q.id AS query_id, q.text AS query, q.created_at AS asked_at, q.selector_version, c.rank,
                  c.served_rank, c.shown, c.previewed, c.expanded, c.used, c.rated_at, q.rating
           FROM query_candidates c JOIN queries q ON q.id = c.query_id
           JOIN chunks k ON k.id = c.chunk_id AND k.content_hash = c.content_hash
           WHERE c.chunk_id = %s AND (%s::text[] IS NULL OR q.scope = ANY(%s::text[]))
           ORDER BY q.id DESC LIMIT %s""",
        (chunk_id, scopes, scopes, limit),
    ).fetchall()
    return [replace(e, selector_version=current_name(e.selector_version)) for e in events]  # old names as now


def scopes_held(conn: psycopg.Connection) -> list[str]:
    """Every scope that holds a document."""
    return [s for (s,) in conn.execute("SELECT DISTINCT scope FROM documents ORDER BY scope")]
