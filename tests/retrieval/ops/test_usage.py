"""Usage weights: the pure weight with literals; reinforcement, decay and the ranking prior on a real
Postgres with the real MiniLM."""

import math
from pathlib import Path

from retrieval.corpus.ingest import ingest_paths
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.ops import usage
from retrieval.params import IngestParams, SearchParams
from retrieval.query.order import with_usage_prior
from retrieval.query.search import search


def test_weight_is_bounded_signed_and_zero_without_evidence():
    w = lambda u, i: usage.weight(u, i, base_rate=0.1, strength=5.0, bound=0.2)  # noqa: E731
    assert w(0, 0) == 0.0  # a fresh chunk: no evidence, no prior
    assert 0 < w(1, 0) < w(5, 0) < w(1000, 0) <= 0.2  # used: up, saturating at the bound
    assert 0 > w(0, 1) > w(0, 10) > w(0, 100_000) >= -0.2  # shown and never used: down
    assert w(1, 9) == 0.0 or abs(w(1, 9)) < 1e-9  # used at the log's own rate: neutral
    assert w(100, 0) > w(100, 100) > 0  # the rate counts, not only the uses
    assert usage.weight(3, 3, base_rate=0.0, strength=5.0, bound=0.2) == 0.0  # nothing ever used: no signal
    assert usage.weight(3, 0, base_rate=1.0, strength=5.0, bound=0.2) == 0.0  # everything used: no signal
    for u, i in [(0, 10**9), (10**9, 0), (7, 3)]:
        assert abs(w(u, i)) <= 0.2


def test_weights_share_one_base_rate_and_changes_are_minimal():
    got = usage.weights({1: (4, 0), 2: (0, 8), 3: (1, 7)}, strength=5.0, bound=0.1)
    assert got[1].weight > 0 > got[2].weight and math.isclose(got[3].weight, usage.weight(1, 7, 5 / 20, 5.0, 0.1))
    write, drop = usage.changes({1: got[1], 9: usage.Usage(1, 1, 0.05)}, got)
    assert sorted(write) == [2, 3] and drop == [9]
    assert usage.changes(got, got) == ({}, [])


def test_prior_reorders_within_the_candidates_only():
    scores = {10: 0.030, 11: 0.029, 12: 0.020}
    assert with_usage_prior([10, 11, 12], scores, {}) == [10, 11, 12]
    assert with_usage_prior([10, 11, 12], scores, {11: 0.1}) == [11, 10, 12]
    assert with_usage_prior([10, 11, 12], scores, {10: -0.1, 12: -1.0}) == [11, 10, 12]
    assert sorted(with_usage_prior([10, 11, 12], scores, {12: 5.0, 10: -5.0})) == [10, 11, 12]


DOCS = {
    "bees.txt": "Honey bees collect nectar from flowers and store it as honey in wax combs.",
    "hive.txt": "A beehive holds thousands of worker bees, drones and a single queen bee.",
    "wasps.txt": "Wasps build paper nests and hunt other insects to feed their larvae.",
}


def test_used_chunk_gains_ignored_one_loses_and_none_drops_out(conn, embedder, tmp_path):
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text + "\n")
    sp = SearchParams(threshold=0.0, top_k=2, hybrid=False)
    ingest_paths(conn, [tmp_path], IngestParams(), sp, embedder)
    ids = {Path(s).name: i for i, s in conn.execute("SELECT id, source FROM chunks")}
    base = search(conn, embedder, "bees in a hive", sp)
    assert [Path(c.source).name for c in base.candidates] == ["bees.txt", "hive.txt"]
    for _ in range(6):  # consumers always use the hive chunk and never bees.txt, shown above it
        r = search(conn, embedder, "bees in a hive", sp)
        qid = log_query(conn, r.query, r.candidates, "first-stage", threshold=sp.threshold)
        record_feedback(conn, qid, used_chunk_ids=[ids["hive.txt"]])

    assert usage.refresh(conn, strength=5.0, bound=0.2, dry_run=True)["changed"] == 2
    assert conn.execute("SELECT count(*) FROM chunk_usage").fetchone() == (0,)  # dry: nothing written
    counts = usage.refresh(conn, strength=5.0, bound=0.2, dry_run=False)
    assert counts == {"chunks_weighted": 2, "up": 1, "down": 1, "changed": 2, "dropped": 0}
    w = dict(conn.execute("SELECT chunk_id, weight FROM chunk_usage"))
    assert 0 < w[ids["hive.txt"]] <= 0.2 and -0.2 <= w[ids["bees.txt"]] < 0 and ids["wasps.txt"] not in w
    assert usage.refresh(conn, strength=5.0, bound=0.2, dry_run=False)["changed"] == 0  # idempotent

    prior = search(conn, embedder, "bees in a hive", sp, usage=True)
    assert {c.chunk_id for c in prior.candidates} == {c.chunk_id for c in base.candidates}  # never a filter
    assert [Path(c.source).name for c in prior.candidates] == ["hive.txt", "bees.txt"]  # but a re-order
    assert [c.rank for c in prior.candidates] == [1, 2]
    assert [c.chunk_id for c in search(conn, embedder, "bees in a hive", sp).candidates] == [
        c.chunk_id for c in base.candidates
    ]  # off: as before

    # the chunk's text changes: its history no longer applies (the log pins chunks by content hash)
    (tmp_path / "bees.txt").write_text("Bees are flying insects closely related to wasps and ants.\n")
    ingest_paths(conn, [tmp_path], IngestParams(), sp, embedder)
    assert usage.refresh(conn, strength=5.0, bound=0.2, dry_run=False)["chunks_weighted"] == 1
    assert [c for (c,) in conn.execute("SELECT chunk_id FROM chunk_usage")] == [ids["hive.txt"]]
