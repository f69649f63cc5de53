"""The HNSW index on the chunks' vectors: the nearest stored chunk of each vector (dedup's lookup), and the index
rebuilt when its build options differ from params."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg

from ..db import DatabaseError, first_line
from ..scopes import DEFAULT


@dataclass(frozen=True)
class Near:
    chunk_id: int
    document_id: int
    score: float  # cosine similarity


def nearest(
    conn: psycopg.Connection,
    vectors: np.ndarray,
    other_than: int | None | list[int | None],
    ef_search: int,
    scope: str = DEFAULT,
) -> list[Near | None]:
    """Nearest stored chunk (HNSW) of `scope` for each vector, of any document but `other_than` (one for all, or
    one per vector), in one statement: dedup stays within a scope."""
    if len(vectors) == 0:
        return []
    others = other_than if isinstance(other_than, list) else [other_than] * len(vectors)
    with conn.transaction():
        conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
        # the planner costs a lateral top-1 per vector as a sequential scan and sort for stores of up to ~10k
        # chunks: 5 ms per vector at 1.7k chunks and growing with the store (bulk ingest became quadratic);
        # the HNSW index answers it in ~0.3 ms
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")  # the nearest of a small scope among a large one
        rows = conn.execute(
            """
            SELECT q.i, n.id, n.document_id, 1 - (n.embedding <=> q.v)
            FROM unnest(%b::vector[]::halfvec[], %s::bigint[]) WITH ORDINALITY AS q(v, other, i)
            CROSS JOIN LATERAL (
                SELECT id, document_id, embedding FROM chunks
                WHERE document_id IS DISTINCT FROM q.other AND scope = %s
                ORDER BY embedding <=> q.v LIMIT 1
            ) n
            """,
            (list(vectors), others, scope),
        ).fetchall()
    out: list[Near | None] = [None] * len(vectors)
    for i, cid, did, score in rows:
        out[i - 1] = Near(cid, did, float(score))
    return out


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
                f"CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding halfvec_cosine_ops)"
                f" WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
            )
    except psycopg.errors.InsufficientPrivilege as e:
        have = ", ".join(sorted(row[0] or [])) if row else "none"
        raise DatabaseError(
            f"the HNSW index has ({have}), search.hnsw_m/hnsw_ef_construction ask m={m}, ef_construction={ef_construction}, "
            f"and this role may not rebuild it ({first_line(e)}): run `pai migrate` as the database owner"
        ) from None
    return True
