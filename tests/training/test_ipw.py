"""Learning from exposure: inverse-propensity weights and the unbiased validation estimate, literal."""

import pytest

from training.ce_data import ips_recall, ipw, mean_recall, rankings
from training.train_ranker import _padded


def record(query, cands):
    return {"query_id": 1, "query": query, "threshold": None, "candidates": cands}


def cand(rank, used, shown, p):
    return {
        "rank": rank,
        "heading": None,
        "parent_heading": None,
        "text": f"passage {rank}",
        "score": 0.5,
        "used": used,
        "shown": shown,
        "propensity": p,
    }


def test_ipw_weighs_what_the_policy_rarely_showed():
    assert ipw(cand(1, True, True, 1.0), 0.05) == 1.0
    assert ipw(cand(9, True, True, 0.01), 0.05) == 20.0  # clipped at 1 / 0.05
    assert ipw(cand(9, True, True, 0.2), 0.05) == 5.0
    assert ipw(cand(9, False, False, 0.0), 0.05) == 1.0  # a judge's label on an unshown candidate
    assert ipw(cand(9, True, None, None), 0.05) == 1.0  # logged before exposure was recorded
    assert ipw(cand(9, True, True, 0.2), 1.0) == 1.0  # clip 1: no correction


def test_an_unshown_candidate_is_left_out_of_the_ranking():
    cands = [cand(1, False, True, 1.0), cand(2, None, False, 0.0), cand(3, True, True, 0.25)]
    (g,) = rankings([record("q", cands)], "train", val_fraction=0.0, ipw_clip=0.05)
    assert g["texts"] == ["passage 1", "passage 3"] and g["used"] == [1] and g["weights"] == [1.0, 4.0]
    _, mask, target = _padded([g])
    assert mask.tolist() == [[True, True]] and target.tolist() == [[0.0, 4.0]]


def test_ips_recall_does_not_let_the_served_order_grade_itself():
    """Served top 2 = [1, 2]; an explored chunk at 4 (propensity 0.1) was cited, as was 1. Naively the
    served order finds every cited chunk; the weighted estimate says it finds 1 of 11 units of relevance."""
    g = {"texts": ["a", "b", "c", "d"], "used": [0, 3], "weights": [1.0, 1.0, 1.0, 10.0]}
    assert mean_recall([g], None, 2) == 0.5  # the explored chunk's label makes even the naive one see it
    assert ips_recall([g], None, 2) == pytest.approx(1 / 11)
    assert ips_recall([g], [[0.5, 1, 0, 0.9]], 2) == pytest.approx(10 / 11)  # top 2: b and the explored d
    assert ips_recall([{**g, "weights": None}], None, 2) == mean_recall([g], None, 2)
