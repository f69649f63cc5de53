"""Database health (retrieval/ops/health.py): which tables a run vacuums or analyzes, literal; when the HNSW index's
recall is due a re-check, literal; and a check measured and recorded on a real Postgres, with a larger
ef_search suggested when recall is below the floor."""

import os

import numpy as np

from retrieval.ops import health


def test_vacuum_where_dead_rows_pile_up_analyze_where_rows_changed():
    stats = {"documents": (100, 5, 40), "chunks": (100, 30, 0), "queries": (1000, 10, 10)}
    # chunk_terms: this run's deletes, not yet in the statistics
    assert health.plan_vacuum(stats, {"chunk_terms": 50}, dead_fraction=0.2) == (
        ["chunks", "chunk_terms"],
        ["documents"],
    )
    assert health.plan_vacuum({}, {}, dead_fraction=0.2) == ([], [])


def test_a_check_is_due_on_a_big_enough_store_never_checked_or_grown_since():
    assert not health.check_due(19, None, k=4, growth=0.2)  # under 5 * k chunks
    assert health.check_due(20, None, k=4, growth=0.2)
    assert not health.check_due(35, (30, 0.9), k=4, growth=0.2)
    assert health.check_due(36, (30, 0.9), k=4, growth=0.2)


def test_a_check_is_measured_recorded_and_suggests_a_larger_ef_search(conn):
    rng = np.random.default_rng(0)
    (doc,) = conn.execute(
        "INSERT INTO documents (source, path, content_hash, n_chunks) VALUES ('webhook:v', 'webhook:', 'h', 30)"
        " RETURNING id"
    ).fetchone()
    for i in range(30):
        v = rng.normal(size=384).astype(np.float32)
        conn.execute(
            "INSERT INTO chunks (document_id, source, ord, start_line, end_line, text, content_hash, tokens, embedding)"
            " VALUES (%s, 'webhook:v', %s, 1, 1, %s, %s, 1, %s)",
            (doc, i, f"vector {i}", os.urandom(8).hex(), v / np.linalg.norm(v)),
        )
    assert health.last_check(conn) is None
    out = health.check_index(conn, 30, ef_search=40, k=4, n_queries=5, min_recall=0.0)
    assert (out["chunks"], out["ef_search"], out["k"], out["queries"]) == (30, 40, 4, 5) and 0 <= out["recall"] <= 1
    assert "suggested_ef_search" not in out and health.last_check(conn) == (30, out["recall"])
    unreachable = health.check_index(conn, 30, ef_search=40, k=4, n_queries=5, min_recall=1.1)
    assert unreachable["suggested_ef_search"] == 1000  # doubled up to the cap: 80, 160, 320, 640, 1000
    health.vacuum(conn, ["chunks"], ["documents"])  # REINDEX CONCURRENTLY, then VACUUM: outside a transaction
