"""Writes on the documents/chunks tables against a real Postgres: a chunk too big for a tsvector is still stored."""

import numpy as np

from retrieval.chunking import Chunk
from retrieval.corpus import store


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
