"""The HNSW index against a real Postgres: rebuilt only when its params change."""

from retrieval.corpus.vector_index import ensure_hnsw


def test_hnsw_index_follows_params(conn):
    assert ensure_hnsw(conn, 16, 64) is False  # the migration's defaults
    assert ensure_hnsw(conn, 8, 32) is True
    (opts,) = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'chunks_embedding_hnsw'").fetchone()
    assert sorted(opts) == ["ef_construction=32", "m=8"]
    assert ensure_hnsw(conn, 8, 32) is False
