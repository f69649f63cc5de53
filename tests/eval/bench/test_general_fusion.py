"""`pai lab bench general`: the ranker's general weights beside the baselines, on real HotpotQA items."""

import numpy as np
import pytest

from eval.bench.general_fusion import compare, echo_query, system_recalls
from eval.items import load_items


@pytest.fixture(scope="module")
def hotpot(benchmark_dir):
    return load_items(benchmark_dir / "hotpotqa" / "dev.jsonl", 30)


def test_w0_is_the_cosine_order_and_a_large_w_is_bm25s(hotpot, embedder):
    r = system_recalls(hotpot, embedder, [0.0, 1e6])
    assert len(r["cosine"]) == 30
    np.testing.assert_array_equal(r["cos + 0 bm25"], r["cosine"])  # no BM25: the cosine order itself
    assert abs(r["cos + 1e+06 bm25"].mean() - r["bm25"].mean()) <= 0.05  # BM25 decides (cosine breaks its ties)
    assert 0.5 < r["hybrid"].mean() <= 1.0


def test_the_sd_floor_leaves_questions_that_name_their_paragraphs_alone(hotpot, embedder):
    """HotpotQA's questions name words that only some candidates have: BM25's sd is above the floor, same picks."""
    r = system_recalls(hotpot, embedder, [1.0], floors=(0.0, 0.2))
    np.testing.assert_array_equal(r["cos + 1 bm25 (sd floor 0.2)"], r["cos + 1 bm25"])


def test_echoed_queries_leave_bm25_no_evidence_and_the_floor_keeps_cosine(hotpot, embedder):
    echoed = echo_query(hotpot)
    assert all(c["text"].startswith(it["query"]) for it in echoed for c in it["candidates"])
    assert hotpot[0]["candidates"][0]["text"] != echoed[0]["candidates"][0]["text"]  # the input is not changed
    r = system_recalls(echoed, embedder, [1.0], floors=(0.0, 0.2))
    floored, plain = r["cos + 1 bm25 (sd floor 0.2)"], r["cos + 1 bm25"]
    assert (floored != plain).any()  # the floor acts here, unlike on the questions as asked
    assert abs(floored.mean() - r["cosine"].mean()) < abs(plain.mean() - r["cosine"].mean())


def test_compare_pairs_each_system_with_the_best_baseline():
    r = {"cosine": np.array([1.0, 0.0, 1.0]), "bm25": np.array([0.0, 0.0, 1.0]), "hybrid": np.array([0.5] * 3)}
    r["cos + 1 bm25"] = np.array([1.0, 1.0, 1.0])
    rows = {row["system"]: row for row in compare(r)}
    assert {row["best_baseline"] for row in rows.values()} == {"cosine"}
    assert rows["cosine"]["diff"] == 0.0 and rows["bm25"]["diff"] == pytest.approx(-1 / 3, abs=1e-4)
    assert rows["cos + 1 bm25"]["diff"] == pytest.approx(1 / 3, abs=1e-4)
    assert rows["cos + 1 bm25"]["ci95_low"] <= rows["cos + 1 bm25"]["diff"] <= rows["cos + 1 bm25"]["ci95_high"]
