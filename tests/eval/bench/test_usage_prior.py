"""`pai lab bench usage` on a miniature SciFact (same file layout) in a real Postgres: it measures the
prior against the no-prior baseline, on held-out queries and on fresh copies of their documents,
and leaves the store exactly as it found it."""

import json

import pytest

from eval.bench import usage_prior
from retrieval.corpus.ingest import ingest_paths
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.params import IngestParams, MaintainParams, SearchParams
from retrieval.query.search import search

CORPUS = {
    "1": ("Honey bees", "Honey bees collect nectar from flowers and store it as honey in wax combs."),
    "2": ("Beehives", "A beehive holds thousands of worker bees, drones and a single queen bee."),
    "3": ("Wasps", "Wasps build paper nests and hunt other insects to feed their larvae."),
    "4": ("Rivers", "Rivers carry fresh water from mountains down to the sea."),
    "5": ("Deltas", "A river delta forms where sediment settles at the river's mouth."),
}
QUERIES = {  # id: (text, split, relevant corpus id)
    "10": ("Bees store nectar as honey.", "train", "1"),
    "11": ("A hive has one queen.", "train", "2"),
    "12": ("Rivers flow to the sea.", "train", "4"),
    "20": ("Honey is made by bees from nectar.", "test", "1"),
    "21": ("Sediment builds deltas at river mouths.", "test", "5"),
}


class Bar:
    def add_task(self, *a, **k):
        return 0

    def advance(self, *a):
        pass


@pytest.fixture
def scifact(tmp_path):
    sf = tmp_path / "bench" / "scifact"
    (sf / "qrels").mkdir(parents=True)
    (sf / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, (t, x) in CORPUS.items())
    )
    (sf / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _, _) in QUERIES.items())
    )
    for split in ("train", "test"):
        rows = [f"{q}\t{d}\t1\n" for q, (_, s, d) in QUERIES.items() if s == split]
        (sf / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(rows))
    return tmp_path / "bench"


def replay(conn, embedder, sp, split):
    for text, s, rel in QUERIES.values():
        if s == split:
            r = search(conn, embedder, text, sp)
            qid = log_query(conn, text, r.candidates, "cosine", threshold=sp.threshold)
            used = [c.chunk_id for c in r.candidates if c.source.endswith("#" + rel)]
            # a judge of every candidate (pai lab simulate's oracle): the others are negatives, shown or not
            ignored = [c.chunk_id for c in r.candidates if c.chunk_id not in used]
            record_feedback(conn, qid, used_chunk_ids=used, ignored_chunk_ids=ignored)


def test_bench_compares_with_the_baseline_and_leaves_the_store_alone(conn, embedder, scifact, all_text):
    sp = SearchParams(threshold=0.0, top_k=3)
    with pytest.raises(ValueError, match="pai lab simulate"):
        usage_prior.run(conn, embedder, scifact, "test", sp, MaintainParams(), [0.1], Bar())
    ingest_paths(conn, [scifact / "scifact" / "corpus.jsonl"], IngestParams(), sp, embedder)
    replay(conn, embedder, sp, "train")
    before = all_text(conn)
    result = usage_prior.run(conn, embedder, scifact, "test", sp, MaintainParams(), [0.1, 1.0], Bar())
    assert all_text(conn) == before  # rolled back: no weights, no fresh documents left behind
    assert result["queries"] == {"held_out": 2, "train": 3, "held_out_excluded_in_log": 0}
    assert result["fresh_documents"] == 2
    assert [r["system"] for r in result["rows"]] == ["no prior", "prior, bound 0.1", "prior, bound 1"]
    base = result["rows"][0]
    assert "held_out_delta_recall@5" not in base and base["fresh_recall@20"] == base["held_out_recall@20"]
    for r in result["rows"]:
        assert r["held_out_recall@20"] == base["held_out_recall@20"]  # a re-order: first-stage recall is the same
        assert r["fresh_recall@20"] == base["fresh_recall@20"]
    assert len(result["rows"][1]["held_out_delta_recall@5"]) == 3
    w = result["weighted_chunks"]["1"]
    assert w["up"] >= 1 and w["down"] >= 1 and -1 <= w["min"] < 0 < w["max"] <= 1
    assert usage_prior.table(result).row_count == 3

    replay(conn, embedder, sp, "test")  # held-out queries in the log are not held out
    with pytest.raises(ValueError, match="nothing is held out"):
        usage_prior.run(conn, embedder, scifact, "test", sp, MaintainParams(), [0.1], Bar())
