"""The baseline table (`eval.systems.BASELINE_TABLE`) is the one list: every row is run and scored by evaluate,
named by `pai eval`, and taken by the deploy gate as its reference where it is the best; the first stage's order
is no reference on the feedback it logged. A row added to the table shows everywhere without another edit."""

import numpy as np
import pytest

from eval.gate import DeployParams, gate
from eval.scoring import score
from eval.systems import BASELINE_TABLE, BASELINES, FIRST_STAGE, baseline_orders, general_ranking, run_systems
from retrieval.fusion import GeneralRule, general_order

ITEMS = [
    {
        "qid": str(i),
        "query": f"Which enzyme does Q{i}X inhibit in the liver",
        "candidates": [
            {"id": f"{i}-{j}", "title": None, "text": text}
            for j, text in enumerate(
                [
                    f"The enzyme Q{i}X inhibits is hepatic lipase, in the liver.",
                    "Liver enzymes are measured in blood tests.",
                    "An enzyme speeds up a chemical reaction.",
                    f"Q{i}X was first made in a laboratory.",
                    "The liver stores glycogen.",
                    "Inhibitors bind to an enzyme's active site.",
                ]
            )
        ],
        "relevant_ids": [f"{i}-0"],
    }
    for i in range(6)
]


@pytest.fixture(scope="module")
def embedder():
    from retrieval.embed import get_embedder

    return get_embedder()


def test_names_are_unique_and_the_first_stage_is_one_of_them():
    assert len(set(BASELINES)) == len(BASELINES) == len(BASELINE_TABLE)
    assert FIRST_STAGE == ("general",) and all(b.what for b in BASELINE_TABLE)


def test_every_baseline_is_run_and_scored(embedder):
    picks = run_systems(ITEMS, embedder, 5)
    result = score(ITEMS, picks, seed=0)
    assert set(result["systems"]) == set(BASELINES)
    for b in BASELINES:  # each is paired with every other baseline
        assert all(f"{b}_vs_{o}" in result["paired_bootstrap"] for o in BASELINES if o != b)


def test_the_general_baseline_is_the_first_stages_order_under_the_rule_it_is_given(embedder):
    it = ITEMS[0]
    texts = [c["text"] for c in it["candidates"]]
    cos = embedder.encode_passages(texts) @ embedder.encode([it["query"]])[0]
    for rule in (GeneralRule(), GeneralRule(bm25_weight=0.0)):
        want = [it["candidates"][i]["id"] for i in general_order(it["query"], cos, texts, rule)]
        assert general_ranking(embedder, it, rule) == want
    # no BM25 weight: the cosine order, the cosine baseline's
    assert general_ranking(embedder, it, GeneralRule(bm25_weight=0.0)) == baseline_orders(embedder, it)["cosine"]


def _result(recalls: dict[str, float], ci=(0.01, 0.09)):
    systems = {s: {"recall@5": r, "answer_in_context": None, "json_valid": 1.0} for s, r in recalls.items()}
    versus = {
        f"selector_vs_{b}": {
            "recall@5_diff": round(recalls["selector"] - recalls[b], 4),
            "ci95_low": ci[0],
            "ci95_high": ci[1],
        }
        for b in BASELINES
    }
    return {"systems": systems, "paired_bootstrap": versus}


@pytest.mark.parametrize("best", BASELINES)
def test_the_gate_takes_each_baseline_as_its_reference_where_it_is_the_best(best):
    recalls = {b: 0.70 for b in BASELINES} | {best: 0.80, "selector": 0.85}
    p = DeployParams(in_domain="a", in_domain_guard="g", out_of_domain="", margin=0.03, guard_tolerance=0.02)
    d = gate({"a": _result(recalls), "g": _result(recalls)}, p)
    assert d.details["a"]["reference"] == best and d.details["a"]["recall@5_diff"] == pytest.approx(0.05)
    # the held-out feedback was logged through the first stage's order: there the next best is the reference
    assert d.details["g"]["reference"] == (best if best not in FIRST_STAGE else BASELINES[0])
    assert d.passed


def test_a_challenger_that_beats_hybrid_but_not_the_first_stage_by_the_margin_is_not_promoted():
    recalls = {b: 0.76 for b in BASELINES} | {"hybrid": 0.82, "general": 0.836, "selector": 0.86}
    d = gate(
        {"a": _result(recalls, ci=(-0.001, 0.049))}, DeployParams(in_domain="a", in_domain_guard="", out_of_domain="")
    )
    assert not d.passed and d.details["a"]["reference"] == "general"
    assert "vs general" in d.reasons[0] and np.isclose(d.details["a"]["recall@5_diff"], 0.024)
