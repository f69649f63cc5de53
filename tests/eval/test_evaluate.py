"""Evaluation numbers of known selectors: a perfect one scores 1, a random one scores chance."""

import json
import random

import pytest

from eval.scoring import score
from eval.systems import BASELINES, run_systems
from tests.feedback_records import candidate, record


def items(n=60):
    out = []
    for i in range(n):
        cands = [{"id": f"{i}-{j}", "title": None, "text": f"filler paragraph {j} about topic {i}"} for j in range(10)]
        gold = random.Random(i).sample(range(10), 2)
        for j in gold:
            cands[j]["text"] = f"GOLD fact {j} for question {i}: the answer is Paris"
        out.append(
            {
                "qid": str(i),
                "query": f"question {i}",
                "candidates": cands,
                "relevant_ids": [f"{i}-{j}" for j in gold],
                "answers": ["Paris"],
            }
        )
    return out


class Perfect:
    version = "perfect"

    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": [i for i, c in enumerate(cands, 1) if c.text.startswith("GOLD")]})


class Random:
    version = "random"

    def __init__(self):
        self.rng = random.Random(7)

    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": self.rng.sample(range(1, len(cands) + 1), k)})


@pytest.fixture(scope="module")
def embedder():
    from retrieval.embed import get_embedder

    return get_embedder()


def test_perfect_selector_scores_one(embedder):
    its = items()
    r = score(its, run_systems(its, embedder, 5, Perfect()), seed=0)
    sel = r["systems"]["selector"]
    assert (sel["recall@5"], sel["precision@5"], sel["mrr"], sel["json_valid"], sel["answer_in_context"]) == (
        1.0,
        0.4,
        1.0,
        1.0,
        1.0,
    )
    assert sel["context_tokens"] < sel["all_candidates_tokens"]
    # the perfect selector beats every baseline with a CI above zero, or ties one that is perfect too
    for base in BASELINES:
        v = r["paired_bootstrap"][f"selector_vs_{base}"]
        assert v["ci95_low"] > 0 or r["systems"][base]["recall@5"] == 1.0


def test_random_selector_scores_chance(embedder):
    its = items(200)
    r = score(its, run_systems(its, embedder, 5, Random()), seed=0)
    # 5 random picks of 10 with 2 relevant: expected recall@5 = 0.5
    assert abs(r["systems"]["selector"]["recall@5"] - 0.5) < 0.07
    assert r["systems"]["selector"]["fallback"] == 0.0


def test_garbage_selector_falls_back_and_is_counted(embedder):
    class Garbage:
        version = "garbage"

        def answer(self, query, cands, k, query_vec=None):
            return "no idea"

    its = items(5)
    r = score(its, run_systems(its, embedder, 5, Garbage()), seed=0)
    assert r["systems"]["selector"]["fallback"] == 1.0
    assert r["systems"]["selector"]["recall@5"] == r["systems"]["cosine"]["recall@5"]


def test_held_out_feedback_is_scored_naively_and_by_inverse_propensity(tmp_path):
    """Served top 5 = ranks 1-5 (P(shown) 0.95); exploration put rank 12 into the context (P 0.01) and the consumer
    cited it and rank 1. The naive figure counts the explored chunk as one label of two; the unbiased one as
    the 20 (1 / clip) chunks like it the policy hid, so an order that leaves it below the cut scores ~0.05."""
    from eval.items import feedback_items
    from retrieval.contracts.selection import Pick
    from retrieval.params import UsedParams

    cands = [candidate(r, r == 1 if r <= 5 else None, r <= 5, 0.95) for r in range(1, 21)]
    cands[11] = candidate(12, True, True, 0.01)
    rec = record(cands, "which passage", 7)
    (tmp_path / "feedback.jsonl").write_text(json.dumps(rec) + "\n")
    (it,) = feedback_items(tmp_path, val_fraction=1.0, limit=0, ipw_clip=0.05, used=UsedParams())
    assert it["relevant_ids"] == ["1", "12"] and len(it["candidates"]) == 20
    assert it["relevant_weights"] == pytest.approx({"1": 1 / 0.95, "12": 20.0})
    served, lifted = ("1", "2", "3", "4", "5"), ("1", "12", "2", "3", "4")
    picks = {s: {"7": Pick(served)} for s in BASELINES} | {"selector": {"7": Pick(lifted)}}
    naive, ips = score([it], picks, seed=0), score([it], picks, seed=0, ips=True)
    assert naive["systems"]["cosine"]["recall@5"] == 0.5 and naive["systems"]["selector"]["recall@5"] == 1.0
    assert ips["systems"]["cosine"]["recall@5"] == pytest.approx(round((1 / 0.95) / (1 / 0.95 + 20), 4))
    assert ips["systems"]["selector"]["recall@5"] == 1.0 and set(ips["systems"]["selector"]) >= {"json_valid"}
    assert "ndcg@5" in naive["systems"]["selector"] and "ndcg@5" not in ips["systems"]["selector"]


def test_a_result_with_the_recall_only_ips_split_is_printed_and_logged(tmp_path, monkeypatch):
    """feedback/val-ips carries Recall@5 alone: the table and the MLflow run take what it has (a KeyError on
    precision@5 once stopped the evaluate stage after every system had run)."""
    import io

    from rich.console import Console

    from eval.evaluate import log_to_mlflow, print_table
    from retrieval.tracking import use_mlflow

    monkeypatch.setenv("PAI_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    full = {"recall@5": 0.5, "precision@5": 0.2, "ndcg@5": 0.4, "mrr": 0.6, "json_valid": 1.0, "fallback": 0.0}
    row = {"queries": 3, "answer_in_context": None, "latency_p50_ms": 1.0, "context_tokens": 9.0}
    ips = {"recall@5": 0.25, "json_valid": 1.0, "fallback": 0.0}
    result = {
        "feedback/val": {"systems": {"ranker": full | row}, "paired_bootstrap": {}},
        "feedback/val-ips": {"systems": {"ranker": ips | row}, "paired_bootstrap": {}},
    }
    out = io.StringIO()
    print_table(result, Console(file=out, width=200))
    assert "feedback/val-ips: 3 queries" in out.getvalue()
    log_to_mlflow(None, result)
    (run,) = use_mlflow().search_runs(output_format="list")
    assert run.data.metrics["feedback/val-ips/ranker/recall_at_5"] == 0.25
    assert "feedback/val-ips/ranker/precision_at_5" not in run.data.metrics
    assert run.data.metrics["feedback/val/ranker/precision_at_5"] == 0.2
