"""Writes and lookups on the documents/chunks tables (the HNSW index over the vectors: `vector_index`). Every
document write is one transaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import psycopg

from ..chunking import Chunk
from ..scopes import DEFAULT
from .vector_index import Near


@dataclass(frozen=True)
class WriteCounts:
    inserted: int
    kept: int
    deleted: int
    document_id: int = 0
    inserted_ids: dict[str, int] = field(default_factory=dict)  # content hash -> id of each chunk inserted


_SOURCE_LOCKS = 0x7A1B  # first key of the per-source advisory locks (migrations use a one-key lock)


def document_hashes(conn: psycopg.Connection, sources: list[str], scope: str = DEFAULT) -> dict[str, tuple[int, str]]:
    """source -> (document id, content hash) for the sources already stored in `scope`."""
    rows = conn.execute(
        "SELECT source, id, content_hash FROM documents WHERE scope = %s AND source = ANY(%s)", (scope, sources)
    ).fetchall()
    return {s: (i, h) for s, i, h in rows}


def lock_sources(conn: psycopg.Connection, sources: list[str]) -> None:
    """Hold each source's lock until the transaction ends, so its writers take turns across processes; taken in
    one order every writer shares (sorted), sent as one pipeline."""
    with conn.pipeline():
        for source in sorted(set(sources)):
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_SOURCE_LOCKS, source))


def chunk_hashes_of(conn: psycopg.Connection, document_ids: list[int]) -> dict[int, dict[str, int]]:
    """document id -> {content hash: chunk id}, for several documents in one round trip."""
    out: dict[int, dict[str, int]] = {i: {} for i in document_ids}
    rows = conn.execute(
        "SELECT document_id, content_hash, id FROM chunks WHERE document_id = ANY(%s)", (document_ids,)
    ).fetchall()
    for d, h, i in rows:
        out[d][h] = i
    return out


def delete_chunks_except(conn: psycopg.Connection, keep: dict[int, list[str]]) -> int:
    """Delete each document's chunks whose hash is not in its `keep` list (their ids kept in `retired_chunks`: the
    log still names them); the number deleted."""
    if not keep:
        return 0
    return conn.execute(
        """
        WITH gone AS (
            DELETE FROM chunks c WHERE c.document_id = ANY(%s)
            AND (c.document_id, c.content_hash) NOT IN (SELECT * FROM unnest(%s::bigint[], %s::text[]))
            RETURNING c.document_id, c.id
        )
        INSERT INTO retired_chunks (document_id, chunk_id) SELECT document_id, id FROM gone ON CONFLICT DO NOTHING
        """,
        (list(keep), *_pairs(keep.items())),
    ).rowcount


def chunk_texts(conn: psycopg.Connection, chunk_ids: list[int]) -> dict[int, tuple[str | None, str | None, str]]:
    """chunk id -> (parent heading, heading, text), for the chunks that still exist."""
    if not chunk_ids:
        return {}
    rows = conn.execute(
        "SELECT id, parent_heading, heading, text FROM chunks WHERE id = ANY(%s)", (chunk_ids,)
    ).fetchall()
    return {i: (p, h, t) for i, p, h, t in rows}


@dataclass(frozen=True)
class BatchNear:
    """A near chunk written in the same `write_documents` call (its id is known only once it is inserted)."""

    source: str
    content_hash: str
    score: float


@dataclass
class DocumentWrite:
    source: str
    path: str
    content_hash: str
    chunks: list[Chunk]  # exactly the chunks the document keeps, in order
    near: dict[str, Near | BatchNear] = field(default_factory=dict)
    scrubbed_with: str | None = None
    written: datetime | None = None  # documents.written_at; None: now
    scope: str = DEFAULT  # the scope the document and its chunks belong to


def write_documents(
    conn: psycopg.Connection, docs: list[DocumentWrite], new_embeddings: dict[str, np.ndarray]
) -> list[WriteCounts]:
    """Make the stored chunks of each document exactly its `chunks`, all in one transaction and a fixed
    number of statements (the sources must be distinct).

    Chunks whose hash is already stored for their document keep their row (and id); the others are inserted
    with `new_embeddings[hash]`; stored chunks not in `chunks` are deleted.
    """
    if not docs:
        return []
    with conn.transaction():
        rows = conn.execute(
            """
            INSERT INTO documents (source, path, content_hash, n_chunks, scrubbed_with, written_at, scope)
            SELECT s, p, h, n, sw, coalesce(w, now()), sc
            FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::text[], %s::timestamptz[], %s::text[])
                AS u(s, p, h, n, sw, w, sc)
            ON CONFLICT (scope, source) DO UPDATE
            SET path = EXCLUDED.path, content_hash = EXCLUDED.content_hash, n_chunks = EXCLUDED.n_chunks,
                scrubbed_with = EXCLUDED.scrubbed_with, written_at = EXCLUDED.written_at, updated_at = now()
            RETURNING source, id
            """,
            (
                [d.source for d in docs],
                [d.path for d in docs],
                [d.content_hash for d in docs],
                [len(d.chunks) for d in docs],
                [d.scrubbed_with for d in docs],
                [d.written for d in docs],
                [d.scope for d in docs],
            ),
        ).fetchall()
        ids = dict(rows)
        doc_ids = [ids[d.source] for d in docs]
        stored = chunk_hashes_of(conn, doc_ids)
        deleted = {i: 0 for i in doc_ids}
        for (i,) in conn.execute(
            """
            WITH gone AS (
                DELETE FROM chunks c WHERE c.document_id = ANY(%s)
                AND (c.document_id, c.content_hash) NOT IN (SELECT * FROM unnest(%s::bigint[], %s::text[]))
                RETURNING c.document_id, c.id
            )
            INSERT INTO retired_chunks (document_id, chunk_id) SELECT document_id, id FROM gone
            RETURNING document_id
            """,
            (doc_ids, *_pairs((i, [c.content_hash for c in d.chunks]) for i, d in zip(doc_ids, docs))),
        ).fetchall():
            deleted[i] += 1
        kept = [(i, o, c) for i, d in zip(doc_ids, docs) for o, c in enumerate(d.chunks) if c.content_hash in stored[i]]
        fresh = [
            (i, o, c, d)
            for i, d in zip(doc_ids, docs)
            for o, c in enumerate(d.chunks)
            if c.content_hash not in stored[i]
        ]
        conn.execute(
            """
            UPDATE chunks c SET ord = u.ord, start_line = u.s, end_line = u.e
            FROM unnest(%s::bigint[], %s::int[], %s::int[], %s::int[]) AS u(id, ord, s, e)
            WHERE c.id = u.id AND (c.ord, c.start_line, c.end_line) IS DISTINCT FROM (u.ord, u.s, u.e)
            """,
            (
                [stored[i][c.content_hash] for i, _, c in kept],
                [o for _, o, _ in kept],
                [c.start_line for _, _, c in kept],
                [c.end_line for _, _, c in kept],
            ),
        )
        stored_near = [d.near.get(c.content_hash) for _, _, c, d in fresh]
        stored_near = [n if isinstance(n, Near) else None for n in stored_near]
        for attempt in range(3):
            try:
                with conn.transaction():  # a savepoint: the insert alone is tried again
                    inserted = conn.execute(
                        """
                        INSERT INTO chunks (document_id, source, ord, heading, parent_heading, level, start_line,
                            end_line, text, content_hash, tokens, embedding, near_chunk_id, near_score, scope)
                        SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[], %s::text[], %s::int[],
                            %s::int[], %s::int[], %s::text[], %s::text[], %s::int[], %b::vector[]::halfvec[],
                            %s::bigint[], %s::float8[], %s::text[])
                        RETURNING source, content_hash, id
                        """,
                        (
                            [i for i, *_ in fresh],
                            [d.source for *_, d in fresh],
                            [o for _, o, _, _ in fresh],
                            [c.heading for _, _, c, _ in fresh],
                            [c.parent_heading for _, _, c, _ in fresh],
                            [c.level for _, _, c, _ in fresh],
                            [c.start_line for _, _, c, _ in fresh],
                            [c.end_line for _, _, c, _ in fresh],
                            [c.text for _, _, c, _ in fresh],
                            [c.content_hash for _, _, c, _ in fresh],
                            [c.tokens for _, _, c, _ in fresh],
                            [new_embeddings[c.content_hash] for _, _, c, _ in fresh],
                            [n.chunk_id if n else None for n in stored_near],
                            [n.score if n else None for n in stored_near],
                            [d.scope for *_, d in fresh],
                        ),
                    ).fetchall()
                break
            except psycopg.errors.ForeignKeyViolation as e:
                # another writer replaced the document of a near chunk after it was found: link to the ones left
                if e.diag.constraint_name != "chunks_near_chunk_id_fkey" or attempt == 2:
                    raise
                ids = [n.chunk_id for n in stored_near if n]
                alive = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE id = ANY(%s)", (ids,))}
                stored_near = [n if n and n.chunk_id in alive else None for n in stored_near]
        chunk_id = {(s, h): i for s, h, i in inserted}
        links = [
            (chunk_id[(d.source, c.content_hash)], chunk_id[(n.source, n.content_hash)], n.score)
            for _, _, c, d in fresh
            if isinstance(n := d.near.get(c.content_hash), BatchNear) and (n.source, n.content_hash) in chunk_id
        ]
        if links:
            conn.execute(
                """
                UPDATE chunks c SET near_chunk_id = u.near, near_score = u.score
                FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS u(id, near, score) WHERE c.id = u.id
                """,
                ([a for a, _, _ in links], [b for _, b, _ in links], [s for _, _, s in links]),
            )
    counts = []
    for i, d in zip(doc_ids, docs):
        n_kept = sum(1 for c in d.chunks if c.content_hash in stored[i])
        new = {
            c.content_hash: chunk_id[(d.source, c.content_hash)] for c in d.chunks if c.content_hash not in stored[i]
        }
        counts.append(WriteCounts(len(d.chunks) - n_kept, n_kept, deleted[i], i, new))
    return counts


def _pairs(items) -> tuple[list[int], list[str]]:
    """[(document id, [hash, ...]), ...] -> the flat (ids, hashes) arrays of an `unnest` pair."""
    pairs = [(d, h) for d, hashes in items for h in hashes]
    return [d for d, _ in pairs], [h for _, h in pairs]


def delete_sources(conn: psycopg.Connection, sources: list[str], scope: str = DEFAULT) -> tuple[int, int]:
    """Delete documents of `scope` (and their chunks); return (documents, chunks) deleted."""
    if not sources:
        return 0, 0
    with conn.transaction():
        (n_chunks,) = conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE d.scope = %s AND d.source = ANY(%s)",
            (scope, sources),
        ).fetchone()
        n_docs = conn.execute("DELETE FROM documents WHERE scope = %s AND source = ANY(%s)", (scope, sources)).rowcount
    return n_docs, n_chunks


def sources_for_paths(conn: psycopg.Connection, paths: list[str], scope: str = DEFAULT) -> dict[str, list[str]]:
    """path -> stored sources of `scope`, for the given file paths."""
    rows = conn.execute(
        "SELECT path, source FROM documents WHERE scope = %s AND path = ANY(%s) ORDER BY source", (scope, paths)
    ).fetchall()
    out: dict[str, list[str]] = {}
    for path, source in rows:
        out.setdefault(path, []).append(source)
    return out


def paths_under(conn: psycopg.Connection, directory: str, scope: str = DEFAULT) -> list[str]:
    prefix = directory.rstrip("/") + "/"
    rows = conn.execute(
        "SELECT DISTINCT path FROM documents WHERE scope = %s AND starts_with(path, %s)", (scope, prefix)
    ).fetchall()
    return [p for (p,) in rows]
