"""Bulk ingest against the embedder's own speed (`pai lab bench ingest`): the corpus read as ingest reads it, and one
run into a fresh scratch database beside a real Postgres, with an empty vector cache that is gone afterwards."""

import json
import os

import pytest

from eval.bench.ingest import corpus_documents, run
from retrieval.params import IngestParams, SearchParams

TEXTS = [
    "Honey bees collect nectar from flowers and store it as honey in wax combs.",
    "Rivers carry fresh water from mountains down to the sea, shaping valleys.",
    "A compiler parses source code into a syntax tree and emits machine code.",
]


def test_the_corpus_is_read_as_ingest_reads_it(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i), "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    assert [d.source.rsplit("#", 1)[1] for d in corpus_documents(corpus, 2, 10_000)] == ["0", "1"]
    assert len(corpus_documents(corpus, 0, 10_000)) == 3  # 0: all
    corpus.write_text(corpus.read_text() + "{not json\n")
    with pytest.raises(ValueError, match="corpus.jsonl:4: invalid JSON"):
        corpus_documents(corpus, 0, 10_000)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty file"):
        corpus_documents(tmp_path / "empty.jsonl", 0, 10_000)


def test_a_run_ingests_into_a_scratch_database_beside_the_embedder_alone(db_url, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)  # the scratch database is made beside it, and dropped
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i), "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    log = []
    docs = corpus_documents(corpus, 0, 10_000)
    r = run(docs, embedder, IngestParams(batch_docs=2), SearchParams(), log=log.append)
    assert (r["documents"], r["chunks"], r["chunks_stored"], r["duplicates_skipped"], r["errors"]) == (3, 3, 3, 0, [])
    assert r["embed_chunks_per_s"] > 0 and r["ingest_chunks_per_s"] > 0 and r["ratio"] > 0
    # a fresh database of two batches is a first load (index after); side by side, the index kept throughout
    assert r["index_deferred"] and not r["index_kept"]["index_deferred"]
    assert (r["index_kept"]["chunks_stored"], r["index_kept"]["ratio"] > 0) == (3, True)
    assert (
        set(r["vectors_cached"]) == {"index_after_s", "index_kept_s", "speedup"} and r["vectors_cached"]["speedup"] > 0
    )
    assert (
        len(log) == 5
        and r["scrub_s"] >= 0
        and r["embed_per_batch_s"] is not None
        and os.environ["PAI_HOME"] == str(tmp_path / "home")
    )  # the empty cache's home undone
