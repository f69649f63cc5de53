"""Learning from exposure: inverse-propensity weights and the unbiased validation estimate, literal."""

import pytest

from retrieval.contracts.metrics import recall_at_k, weighted_recall_at_k
from retrieval.logs.feedback import ipw
from training.feedback_rankings import false_cite_rate, ips_recall, mean_recall, rankings
from training.ranker_fit import _padded


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


def test_the_all_normaliser_ranks_an_unshown_candidate_without_a_label():
    """normaliser "all" (Ai et al. 2018): the softmax runs over every candidate, the unshown one in the
    normaliser with target 0 and weight 0, never in `used`; only the cited chunk pulls, by its 1 / propensity."""
    cands = [cand(1, False, True, 1.0), cand(2, None, False, 0.0), cand(3, True, True, 0.25)]
    (g,) = rankings([record("q", cands)], "train", val_fraction=0.0, ipw_clip=0.05, unlabelled=True)
    assert g["texts"] == ["passage 1", "passage 2", "passage 3"] and g["used"] == [2]
    _, mask, target = _padded([g])
    assert mask.tolist() == [[True, True, True]] and target.tolist() == [[0.0, 0.0, 4.0]]


def test_the_false_cite_rate_is_read_off_the_thumbs_down_queries():
    """Rated -1, nothing in the context answered: 1 of its 4 shown chunks cited anyway = 0.25; a +1 query's
    citations and the unshown candidates say nothing about the rate; a judge (no citation in a -1 context): 0."""
    down = {**record("q", [cand(r, r == 2, r <= 4, 1.0) for r in range(1, 7)]), "rating": -1}
    up = {**record("q", [cand(r, r <= 3, r <= 4, 1.0) for r in range(1, 7)]), "rating": 1}
    assert false_cite_rate([down, up, record("q", [cand(1, True, True, 1.0)])]) == 0.25
    judged = {**record("q", [cand(1, False, True, 1.0), cand(2, True, False, 0.0)]), "rating": -1}
    assert false_cite_rate([judged]) == 0.0 and false_cite_rate([up]) == 0.0


def test_the_affine_correction_takes_the_false_cite_rate_off_every_shown_chunk():
    """With a false-cite rate of 0.1 every shown candidate's target loses 0.1 x its weight (per cited chunk of
    the query), cited or not: being shown no longer earns a chunk "use". An unshown candidate keeps target 0."""
    cands = [cand(1, False, True, 1.0), cand(2, None, False, 0.0), cand(3, True, True, 0.5), cand(4, True, True, 1.0)]
    (g,) = rankings([record("q", cands)], "train", val_fraction=0.0, ipw_clip=0.05, unlabelled=True, false_cite=0.1)
    assert g["used"] == [2, 3] and g["offsets"] == [0.1, 0.0, pytest.approx(0.2), 0.1]
    _, _, target = _padded([g])
    assert target[0].tolist() == pytest.approx([-0.05, 0.0, (2.0 - 0.2) / 2, (1.0 - 0.1) / 2])
    (g,) = rankings([record("q", cands)], "train", val_fraction=0.0, ipw_clip=0.05, unlabelled=True)
    assert g["offsets"] is None and _padded([g])[2][0].tolist() == [0.0, 0.0, 1.0, 0.5]


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
        cand(1, True, True, 0.95),
        cand(2, False, True, 0.95),
        cand(3, None, False, 0.01),
        cand(4, True, True, 0.01),
    ]
    (lab,) = rankings([record("q", cands)], "val", val_fraction=1.0, ipw_clip=0.05)
    (all_,) = rankings([record("q", cands)], "val", val_fraction=1.0, ipw_clip=0.05, unlabelled=True)
    assert lab["texts"] == ["passage 1", "passage 2", "passage 4"] and lab["used"] == [0, 2]
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
