"""Learning from exposure: inverse-propensity weights and the unbiased validation estimate, literal."""

import pytest

from retrieval.contracts.metrics import recall_at_k, weighted_recall_at_k
from retrieval.logs.feedback_records import ipw
from tests.feedback_records import candidate, record
from training.feedback_rankings import ips_recall, mean_recall, rankings
from training.ranker_fit import _padded


def test_ipw_weighs_what_the_policy_rarely_showed():
    assert ipw(candidate(1, True, True, 1.0), 0.05) == 1.0
    assert ipw(candidate(9, True, True, 0.01), 0.05) == 20.0  # clipped at 1 / 0.05
    assert ipw(candidate(9, True, True, 0.2), 0.05) == 5.0
    assert ipw(candidate(9, False, False, 0.0), 0.05) == 1.0  # a judge's label on an unshown candidate
    assert ipw(candidate(9, True, None, None), 0.05) == 1.0  # logged before exposure was recorded
    assert ipw(candidate(9, True, True, 0.2), 1.0) == 1.0  # clip 1: no correction


def test_the_softmax_ranks_an_unshown_candidate_without_a_label():
    """The softmax runs over every candidate (Ai et al. 2018), the unshown one at target 0
    and weight 0, never in `used`; only the cited chunk pulls, by its 1 / propensity."""
    cands = [candidate(1, False, True, 1.0), candidate(2, None, False, 0.0), candidate(3, True, True, 0.25)]
    (g,) = rankings([record(cands)], "train", val_fraction=0.0, ipw_clip=0.05)
    assert g["texts"] == ["passage 1", "passage 2", "passage 3"] and g["used"] == [2]
    _, mask, target = _padded([g])
    assert mask.tolist() == [[True, True, True]] and target.tolist() == [[0.0, 0.0, 4.0]]


def test_ips_recall_does_not_let_the_served_order_grade_itself():
    """Served top 2 = [1, 2]; an explored chunk at 4 (propensity 0.1) was cited, as was 1. Naively the
    served order finds every cited chunk; the weighted estimate says it finds 1 of 11 units of relevance."""
    g = {"texts": ["a", "b", "c", "d"], "used": [0, 3], "weights": [1.0, 1.0, 1.0, 10.0]}
    assert mean_recall([g], None, 2) == 0.5  # the explored chunk's label makes even the naive one see it
    assert ips_recall([g], None, 2) == pytest.approx(1 / 11)
    assert ips_recall([g], [[0.5, 1, 0, 0.9]], 2) == pytest.approx(10 / 11)  # top 2: b and the explored d
    assert ips_recall([{**g, "weights": None}], None, 2) == mean_recall([g], None, 2)


def test_a_held_out_ranking_keeps_the_unshown_candidates_unlabelled():
    """On labelled candidates alone every order of the shown ones is perfect; the held-out estimate ranks all."""
    cands = [
        candidate(1, True, True, 0.95),
        candidate(2, False, True, 0.95),
        candidate(3, None, False, 0.01),
        candidate(4, True, True, 0.01),
    ]
    (all_,) = rankings([record(cands)], "val", val_fraction=1.0, ipw_clip=0.05)
    assert all_["texts"] == ["passage 1", "passage 2", "passage 3", "passage 4"] and all_["used"] == [0, 3]
    assert all_["weights"] == pytest.approx([1 / 0.95, 1 / 0.95, 0.0, 20.0])  # no label, no weight
    # the retrieval order's top 2 holds 1 of the 2 cited: among labelled alone the cut at 2 of 3 hides it less
    assert ips_recall([all_], None, 2) == pytest.approx((1 / 0.95) / (1 / 0.95 + 20))
    assert ips_recall([all_], [[1, 0, 0.5, 0.9]], 2) == pytest.approx(1.0)  # an order that lifts the explored one


def test_weighted_recall_is_recall_with_unit_weights():
    ranked = ["a", "b", "c", "d"]
    assert weighted_recall_at_k({"a": 1.0, "d": 1.0}, ranked, 2) == recall_at_k({"a", "d"}, ranked, 2) == 0.5
    assert weighted_recall_at_k({"a": 1.0, "d": 20.0}, ranked, 2) == pytest.approx(1 / 21)
    assert weighted_recall_at_k({"a": 1.0, "d": 20.0}, ["d", "x"], 2) == pytest.approx(20 / 21)
    assert weighted_recall_at_k({}, ranked, 2) == 0.0
