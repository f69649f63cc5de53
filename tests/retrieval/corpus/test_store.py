"""Writes on the documents/chunks tables against a real Postgres: a chunk too big for a tsvector is still stored,
and the HNSW index is rebuilt only when its params change."""

import numpy as np

from retrieval.chunking import Chunk
from retrieval.corpus import store
from retrieval.corpus.store import ensure_hnsw


def test_a_chunk_too_big_for_a_tsvector_is_still_stored(conn):
    """The floor under chunking: full-text terms come from the first 100,000 characters."""
    text = " ".join(f"w{i}" for i in range(400_000))
    chunk = Chunk(text, 1, 1)
    (written,) = store.write_documents(
        conn,
        [store.DocumentWrite("big", "big", "h", [chunk])],
        {chunk.content_hash: np.ones(384, dtype=np.float32) / 384**0.5},
    )
    assert written.inserted == 1
    assert conn.execute("SELECT count(*) FROM chunk_terms").fetchone() == (1,)


def test_hnsw_index_follows_params(conn):
    assert ensure_hnsw(conn, 16, 64) is False  # the migration's defaults
    assert ensure_hnsw(conn, 8, 32) is True
    (opts,) = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'chunks_embedding_hnsw'").fetchone()
    assert sorted(opts) == ["ef_construction=32", "m=8"]
    assert ensure_hnsw(conn, 8, 32) is False
