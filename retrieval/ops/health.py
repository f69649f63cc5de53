"""Database health: VACUUM (ANALYZE) / ANALYZE where rows changed a lot, and the HNSW index's recall
re-checked when the store has grown since the last check (recorded in `index_checks`).

pgvector's README, "Vacuuming": "Vacuuming can take a while for HNSW indexes. Speed it up by
reindexing first" (`REINDEX INDEX CONCURRENTLY`, then `VACUUM`), so a vacuum of `chunks` rebuilds
its HNSW index first; CONCURRENTLY keeps queries and writes running meanwhile.
"""

from __future__ import annotations

import numpy as np
import psycopg

from ..contracts.metrics import recall_vs_exact

TABLES = ("documents", "chunks", "chunk_terms", "chunk_usage", "queries", "query_candidates")
HNSW_INDEX = "chunks_embedding_hnsw"
MIN_CHUNKS_PER_K = 5  # a recall check needs at least 5 * k chunks (with fewer, top-k is most of the table)


def table_stats(conn: psycopg.Connection) -> dict[str, tuple[int, int, int]]:
    """table -> (live rows, dead rows, rows modified since the last analyze), from pg_stat."""
    # this session's own counts (the run's deletes and writes) reach pg_stat when it next goes idle
    conn.execute("SELECT pg_stat_force_next_flush()")
    rows = conn.execute(
        "SELECT relname, n_live_tup, n_dead_tup, n_mod_since_analyze FROM pg_stat_user_tables"
        " WHERE schemaname = current_schema() AND relname = ANY(%s)",
        (list(TABLES),),
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def plan_vacuum(
    stats: dict[str, tuple[int, int, int]], deleted: dict[str, int], dead_fraction: float
) -> tuple[list[str], list[str]]:
    """(tables to VACUUM (ANALYZE), tables only to ANALYZE). `deleted` = rows this run deleted,
    which the statistics may not show yet (they are flushed about once a second)."""
    vacuum, analyze = [], []
    for t in TABLES:
        live, dead, modified = stats.get(t, (0, 0, 0))
        dead = max(dead, deleted.get(t, 0))
        if dead and dead > dead_fraction * max(live, 1):
            vacuum.append(t)
        elif modified and modified > dead_fraction * max(live, 1):
            analyze.append(t)
    return vacuum, analyze


def vacuum(conn: psycopg.Connection, vacuum_tables: list[str], analyze_tables: list[str]) -> None:
    """Run the plan (outside a transaction: VACUUM and REINDEX CONCURRENTLY cannot run inside one)."""
    for t in vacuum_tables:
        if t == "chunks":
            conn.execute(f"REINDEX INDEX CONCURRENTLY {HNSW_INDEX}")
        conn.execute(f"VACUUM (ANALYZE) {t}")
    for t in analyze_tables:
        conn.execute(f"ANALYZE {t}")


def last_check(conn: psycopg.Connection) -> tuple[int, float] | None:
    """(chunks, recall) of the latest recall check, or None."""
    return conn.execute("SELECT chunks, recall FROM index_checks ORDER BY id DESC LIMIT 1").fetchone()


def check_due(chunks: int, last: tuple[int, float] | None, k: int, growth: float) -> bool:
    """A check is due on a store big enough to measure, never checked, or grown by `growth` since."""
    if chunks < MIN_CHUNKS_PER_K * k:
        return False
    return last is None or chunks >= last[0] * (1 + growth)


def sample_queries(conn: psycopg.Connection, n: int) -> np.ndarray:
    """`n` query vectors: midpoints of random pairs of stored chunk embeddings, normalised. Real
    vectors near the data, but not in it (a stored vector would find itself and flatter the index)."""
    with conn.transaction():
        conn.execute("SELECT setseed(0.5)")  # the same sample while the store is the same
        vecs = [
            v
            for (v,) in conn.execute(
                "SELECT embedding::vector::real[] FROM chunks ORDER BY random() LIMIT %s", (2 * n,)
            )
        ]
    if len(vecs) < 2:
        return np.zeros((0, 0), dtype=np.float32)
    a = np.asarray(vecs[: len(vecs) // 2], dtype=np.float32)
    b = np.asarray(vecs[len(vecs) // 2 : 2 * (len(vecs) // 2)], dtype=np.float32)
    mid = a + b
    return mid / np.maximum(np.linalg.norm(mid, axis=1, keepdims=True), 1e-12)


def measure_recall(conn: psycopg.Connection, queries: np.ndarray, ef_search: int, k: int) -> float:
    """HNSW top-k (the index forced, as `pai lab bench retrieval` does) against the exact scan's top-k."""
    sql = "SELECT id FROM chunks ORDER BY embedding <=> %s::halfvec LIMIT %s"
    found, truth = [], []
    for q in queries:
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
            found.append([i for (i,) in conn.execute(sql, (q, k), prepare=False)])
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            truth.append([i for (i,) in conn.execute(sql, (q, k), prepare=False)])
    return recall_vs_exact(found, truth) if found else 1.0


def check_index(
    conn: psycopg.Connection, chunks: int, ef_search: int, k: int, n_queries: int, min_recall: float
) -> dict:
    """Measure recall at `ef_search` and record it; below `min_recall`, also try doubled ef_search values
    (up to 1000) and say which reaches it. Never changes params: params.yaml stays the one source."""
    queries = sample_queries(conn, n_queries)
    recall = measure_recall(conn, queries, ef_search, k)
    conn.execute(
        "INSERT INTO index_checks (chunks, ef_search, k, queries, recall) VALUES (%s, %s, %s, %s, %s)",
        (chunks, ef_search, k, len(queries), recall),
    )
    out = {"chunks": chunks, "ef_search": ef_search, "k": k, "queries": len(queries), "recall": round(recall, 4)}
    ef = ef_search
    while recall < min_recall and ef < 1000:
        ef = min(2 * ef, 1000)
        recall = measure_recall(conn, queries, ef, k)
        out["suggested_ef_search"], out["suggested_recall"] = ef, round(recall, 4)
    return out
