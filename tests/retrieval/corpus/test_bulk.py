"""A first load into an empty store defers the HNSW index (`retrieval.corpus.bulk`): real Postgres, real MiniLM.
What it stores must be what the usual way stores: the same chunks, the same duplicates skipped, the same links."""

from dataclasses import replace

import numpy as np
import pytest

from retrieval.corpus.bulk import RunIndex
from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.params import IngestParams, SearchParams

IP, SP = IngestParams(chunk_tokens=16, batch_docs=2), SearchParams()

CAT = "The cat sat on the warm windowsill all afternoon."
DOCS = [
    Document("note:cat", "", CAT + "\n\nBoil the pasta for ten minutes in salted water.", "text"),
    Document("note:bees", "", "Honey bees store nectar as honey in wax combs.", "text"),
    Document("note:rivers", "", "A delta forms where sediment settles at the sea.", "text"),
    Document("note:stars", "", "Stars fuse hydrogen into helium in their cores.", "text"),
    Document(  # a later batch: near ones of note:cat's first chunk (cos 0.95) and of its second (0.91), both kept
        "note:cat2",
        "",
        "All afternoon the cat sat on the warm windowsill.\n\nCook pasta in boiling salted water for about ten minutes.",
        "text",
    ),
    Document("note:cat3", "", "the cat  sat on the warm windowsill ALL afternoon.", "text"),  # a duplicate: skipped
]


def has_index(conn) -> bool:
    return conn.execute("SELECT to_regclass('chunks_embedding_hnsw') IS NOT NULL").fetchone()[0]


def stored(conn) -> list[tuple]:
    return conn.execute(
        """SELECT c.source, c.text, n.text FROM chunks c LEFT JOIN chunks n ON n.id = c.near_chunk_id
           ORDER BY c.source, c.ord"""
    ).fetchall()


def counts(r) -> tuple:
    return (r.documents_new, r.chunks_inserted, r.duplicates_skipped, r.near_linked, r.errors)


def test_a_first_load_builds_the_index_after_and_stores_what_the_usual_way_stores(conn, embedder):
    first = ingest_documents(conn, DOCS, IP, SP, embedder)
    assert first.index_deferred and has_index(conn)
    assert counts(first) == (6, 7, 1, 2, [])  # the paraphrase and the pasta linked, the repeat skipped, across batches
    deferred = stored(conn)
    conn.execute("DELETE FROM documents")
    conn.commit()
    usual = ingest_documents(conn, DOCS, replace(IP, bulk_max_chunks=0), SP, embedder)
    assert not usual.index_deferred and counts(usual) == counts(first) and stored(conn) == deferred
    assert (
        "note:cat2",
        "Cook pasta in boiling salted water for about ten minutes.",
        "Boil the pasta for ten minutes in salted water.",
    ) in deferred


def test_the_index_comes_back_once_the_run_holds_bulk_max_chunks(conn, embedder):
    r = ingest_documents(conn, DOCS, replace(IP, bulk_max_chunks=2), SP, embedder)
    assert r.index_deferred and has_index(conn) and counts(r) == (6, 7, 1, 2, [])


def test_a_store_with_chunks_keeps_its_index(conn, embedder):
    ingest_documents(conn, DOCS[:1], IP, SP, embedder)
    r = ingest_documents(conn, DOCS[1:], IP, SP, embedder)
    assert not r.index_deferred and has_index(conn) and counts(r) == (5, 5, 1, 2, [])


def test_a_source_replaced_within_the_load_is_no_duplicate_of_anything(conn, embedder):
    """note:a is written, then replaced by a later batch; note:b repeats note:a's first text. That chunk is gone
    by then, so note:b's is kept (the usual way compares with what is committed: the same)."""
    docs = [
        Document("note:a", "", CAT, "text"),
        Document("note:x", "", "Honey bees store nectar as honey in wax combs.", "text"),
        Document("note:a", "", "Stars fuse hydrogen into helium in their cores.", "text"),
        Document("note:y", "", "A delta forms where sediment settles at the sea.", "text"),
        Document("note:b", "", CAT, "text"),
    ]
    r = ingest_documents(conn, docs, IP, SP, embedder)
    assert r.index_deferred and r.errors == [] and r.duplicates_skipped == 0
    texts = dict(conn.execute("SELECT source, text FROM chunks").fetchall())
    assert texts["note:b"] == CAT and texts["note:a"].startswith("Stars")


def test_run_index_answers_as_the_store_would():
    """Exact nearest of another document, over halfvec-rounded unit vectors; a forgotten chunk is never answered."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=(6, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    run = RunIndex()
    run.add([10, 11, 12], [1, 1, 2], v[:3])
    run.add([13], [3], v[3:4])
    near = run.nearest(v[:2], [1, None])
    assert near[0].document_id != 1  # its own document's chunks are not candidates
    assert near[1].chunk_id == 11 and near[1].score == pytest.approx(1.0, abs=1e-3)
    run.forget({11})
    assert len(run) == 3 and run.nearest(v[1:2], [None])[0].chunk_id != 11
    assert RunIndex().nearest(v[:1], [None]) == [None]


def index_defs(conn) -> set[str]:
    return {
        d
        for (d,) in conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename IN ('chunks', 'chunk_terms', 'documents')"
        ).fetchall()
    }


def test_a_first_load_leaves_every_index_the_migrations_made(conn, embedder):
    before = index_defs(conn)
    assert any("gin_trgm_ops" in d for d in before) and any("chunk_terms_tsv" in d for d in before)
    assert ingest_documents(conn, DOCS, IP, SP, embedder).index_deferred
    assert index_defs(conn) == before


def test_indexes_a_killed_first_load_left_away_come_back_with_the_next_ingest(conn, embedder, tmp_path):
    from retrieval.corpus import bulk
    from retrieval.corpus.ingest import ingest_paths

    before = index_defs(conn)
    assert bulk.begin(conn, len(DOCS), IP) is not None  # the load starts, and its process dies: no finish
    assert index_defs(conn) < before and not has_index(conn)
    (tmp_path / "cat.md").write_text(CAT + "\n")
    ingest_paths(conn, [tmp_path / "cat.md"], IP, SP, embedder)
    assert index_defs(conn) == before
    hits = conn.execute("SELECT count(*) FROM chunks WHERE 'windowsill' <% text").fetchone()[0]
    assert hits == 1  # the trigram arm finds it
