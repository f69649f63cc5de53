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


def test_a_near_chunk_another_writer_deleted_meanwhile_leaves_the_chunk_unlinked(conn):
    """Two writers at once: ingest found chunk N of another note near, and that note was rewritten (N deleted) before
    this write: the chunk is stored, unlinked, instead of the write failing on the foreign key."""
    vec = {Chunk("a shared paragraph", 1, 1).content_hash: np.ones(384, dtype=np.float32) / 384**0.5}
    chunk = Chunk("a shared paragraph", 1, 1)
    (first,) = store.write_documents(conn, [store.DocumentWrite("one", "one", "h1", [chunk])], vec)
    (near_id,) = first.inserted_ids.values()
    conn.execute("DELETE FROM chunks WHERE id = %s", (near_id,))  # the other writer's rewrite, committed
    near = store.Near(near_id, first.document_id, 0.99)
    (second,) = store.write_documents(
        conn, [store.DocumentWrite("two", "two", "h2", [chunk], near={chunk.content_hash: near})], vec
    )
    assert second.inserted == 1
    rows = conn.execute("SELECT source, near_chunk_id FROM chunks").fetchall()
    assert rows == [("two", None)]
