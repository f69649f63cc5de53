"""Writes and lookups on the documents/chunks tables. Every document write is one transaction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg

from .chunking import Chunk
from .db import DatabaseError, first_line


@dataclass(frozen=True)
class Near:
    chunk_id: int
    document_id: int
    score: float  # cosine similarity


@dataclass(frozen=True)
class WriteCounts:
    inserted: int
    kept: int
    deleted: int


_SOURCE_LOCKS = 0x7A1B  # first key of the per-source advisory locks (migrations use a one-key lock)


def lock_source(conn: psycopg.Connection, source: str) -> None:
    """Hold `source`'s lock until the transaction ends: its writers take turns, across processes."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_SOURCE_LOCKS, source))


def document_hashes(conn: psycopg.Connection, sources: list[str]) -> dict[str, tuple[int, str]]:
    """source -> (document id, content hash) for the sources already stored."""
    rows = conn.execute("SELECT source, id, content_hash FROM documents WHERE source = ANY(%s)", (sources,)).fetchall()
    return {s: (i, h) for s, i, h in rows}


def chunk_hashes(conn: psycopg.Connection, document_id: int) -> dict[str, int]:
    rows = conn.execute("SELECT content_hash, id FROM chunks WHERE document_id = %s", (document_id,)).fetchall()
    return dict(rows)


def nearest(conn: psycopg.Connection, vectors: np.ndarray, other_than: int | None, ef_search: int) -> list[Near | None]:
    """Nearest stored chunk (HNSW) of any document but `other_than`, for each vector."""
    if len(vectors) == 0:
        return []
    with conn.transaction():
        conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
        rows = conn.execute(
            """
            SELECT q.i, n.id, n.document_id, 1 - (n.embedding <=> q.v)
            FROM unnest(%s::vector[]) WITH ORDINALITY AS q(v, i)
            CROSS JOIN LATERAL (
                SELECT id, document_id, embedding FROM chunks
                WHERE document_id IS DISTINCT FROM %s
                ORDER BY embedding <=> q.v LIMIT 1
            ) n
            """,
            (list(vectors), other_than),
        ).fetchall()
    out: list[Near | None] = [None] * len(vectors)
    for i, cid, did, score in rows:
        out[i - 1] = Near(cid, did, float(score))
    return out


def write_document(
    conn: psycopg.Connection,
    *,
    source: str,
    path: str,
    content_hash: str,
    chunks: list[Chunk],
    new_embeddings: dict[str, np.ndarray],
    near: dict[str, Near],
    scrubbed_with: str | None = None,
) -> WriteCounts:
    """Make the stored chunks of `source` exactly `chunks`, in one transaction.

    Chunks whose hash is already stored for this document keep their row (and id); the others are
    inserted with `new_embeddings[hash]`; stored chunks not in `chunks` are deleted.
    """
    with conn.transaction():
        (doc_id,) = conn.execute(
            """
            INSERT INTO documents (source, path, content_hash, n_chunks, scrubbed_with) VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT (source) DO UPDATE
            SET path = EXCLUDED.path, content_hash = EXCLUDED.content_hash,
                n_chunks = EXCLUDED.n_chunks, scrubbed_with = EXCLUDED.scrubbed_with, updated_at = now()
            RETURNING id
            """,
            (source, path, content_hash, len(chunks), scrubbed_with),
        ).fetchone()
        hashes = [c.content_hash for c in chunks]
        deleted = conn.execute(
            "DELETE FROM chunks WHERE document_id = %s AND NOT (content_hash = ANY(%s))",
            (doc_id, hashes),
        ).rowcount
        stored = chunk_hashes(conn, doc_id)
        kept = [(i, c) for i, c in enumerate(chunks) if c.content_hash in stored]
        fresh = [(i, c) for i, c in enumerate(chunks) if c.content_hash not in stored]
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE chunks SET ord = %s, start_line = %s, end_line = %s WHERE id = %s"
                " AND (ord, start_line, end_line) IS DISTINCT FROM (%s, %s, %s)",
                [(i, c.start_line, c.end_line, stored[c.content_hash], i, c.start_line, c.end_line) for i, c in kept],
            )
            cur.executemany(
                """
                INSERT INTO chunks (document_id, source, ord, heading, parent_heading, level,
                    start_line, end_line, text, content_hash, tokens, embedding, near_chunk_id, near_score)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
                """,
                [
                    (
                        doc_id,
                        source,
                        i,
                        c.heading,
                        c.parent_heading,
                        c.level,
                        c.start_line,
                        c.end_line,
                        c.text,
                        c.content_hash,
                        c.tokens,
                        new_embeddings[c.content_hash],
                        near[c.content_hash].chunk_id if c.content_hash in near else None,
                        near[c.content_hash].score if c.content_hash in near else None,
                    )
                    for i, c in fresh
                ],
            )
    return WriteCounts(inserted=len(fresh), kept=len(kept), deleted=deleted)


def delete_sources(conn: psycopg.Connection, sources: list[str]) -> tuple[int, int]:
    """Delete documents (and their chunks); return (documents, chunks) deleted."""
    if not sources:
        return 0, 0
    with conn.transaction():
        (n_chunks,) = conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.source = ANY(%s)",
            (sources,),
        ).fetchone()
        n_docs = conn.execute("DELETE FROM documents WHERE source = ANY(%s)", (sources,)).rowcount
    return n_docs, n_chunks


def sources_for_paths(conn: psycopg.Connection, paths: list[str]) -> dict[str, list[str]]:
    """path -> stored sources, for the given file paths."""
    rows = conn.execute("SELECT path, source FROM documents WHERE path = ANY(%s) ORDER BY source", (paths,)).fetchall()
    out: dict[str, list[str]] = {}
    for path, source in rows:
        out.setdefault(path, []).append(source)
    return out


def paths_under(conn: psycopg.Connection, directory: str) -> list[str]:
    prefix = directory.rstrip("/") + "/"
    rows = conn.execute("SELECT DISTINCT path FROM documents WHERE starts_with(path, %s)", (prefix,)).fetchall()
    return [p for (p,) in rows]


def ensure_hnsw(conn: psycopg.Connection, m: int, ef_construction: int) -> bool:
    """Rebuild the HNSW index when its (m, ef_construction) differ from params; True if rebuilt."""
    row = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'chunks_embedding_hnsw'").fetchone()
    want = {f"m={m}", f"ef_construction={ef_construction}"}
    if row and set(row[0] or []) == want:
        return False
    try:
        with conn.transaction():
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            conn.execute(
                f"CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)"
                f" WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
            )
    except psycopg.errors.InsufficientPrivilege as e:
        have = ", ".join(sorted(row[0] or [])) if row else "none"
        raise DatabaseError(
            f"the HNSW index has ({have}), search.hnsw_m/hnsw_ef_construction ask m={m}, ef_construction={ef_construction}, "
            f"and this role may not rebuild it ({first_line(e)}): run `pai migrate` as the database owner"
        ) from None
    return True
