"""The general order (retrieval/fusion.py): one rule for the first stage and the ranker's general weights."""

import numpy as np
import pytest

from retrieval.contracts.ranking_features import GENERAL_BM25, features, gated_scores
from retrieval.fusion import GeneralRule, bm25_raw, general_floor, general_order, general_scores
from retrieval.params import SearchParams

TEXTS = [
    "Return the list of rows the cursor fetched so far.",
    "Close the connection and release its resources.",
    "The Kessler syndrome describes cascading collisions of orbital debris.",
    "Open a new connection to the database server.",
]


def test_the_ranker_general_weights_score_by_the_same_rule():
    rng = np.random.default_rng(0)
    q = rng.normal(size=8)
    q /= np.linalg.norm(q)
    P = rng.normal(size=(len(TEXTS), 8))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    rule = GeneralRule()
    for query in ("what happens after debris collides in orbit", "What is the Kessler syndrome", "connection"):
        floor = general_floor(query, rule.names_floor, rule.plain_floor, rule.name_ramp)
        feats = features(query, q, P, TEXTS, None, bm25_sd_floor=rule.names_floor, general_bm25_floor=floor)
        assert GENERAL_BM25 in feats
        general = {"similarity": 1.0, "adapted": 0.0, "bm25": rule.bm25_weight, "prior": 0.0}
        ranker = gated_scores(feats, {"similarity": 0.0, "bm25": 9.0}, general, 0.0)
        np.testing.assert_allclose(general_scores(query, P @ q, TEXTS, rule), ranker, atol=1e-12)


def test_a_name_moves_its_candidate_further_than_a_plain_word_does():
    cos = np.array([0.50, 0.30, 0.48, 0.30])  # cosine prefers candidate 0, by a little
    named = general_scores("tell me about the Kessler Syndrome", cos, TEXTS)
    plain = general_scores("tell me about the kessler syndrome", cos, TEXTS)
    assert general_order("tell me about the Kessler Syndrome", cos, TEXTS)[0] == 2
    assert named[2] - named[0] > plain[2] - plain[0]  # the plain floor shrinks BM25's push


def test_bm25_weight_zero_is_the_cosine_order_and_no_evidence_changes_nothing():
    cos = np.array([0.1, 0.9, 0.3, 0.2])
    assert general_order("Kessler", cos, TEXTS, GeneralRule(bm25_weight=0.0)) == [1, 2, 3, 0]
    assert general_order("of the and", cos, TEXTS) == [1, 2, 3, 0]  # stopwords only: BM25 is flat


def test_hostile_inputs():
    assert general_scores("q", np.zeros(0), []).shape == (0,)
    nul = ["a\x00b connection", "\x00" * 10, "x" * 200_000, ""]
    s = general_scores("connection\x00 ünïcödé 数据库", np.array([0.2, 0.1, 0.3, 0.0]), nul)
    assert s.shape == (4,) and np.isfinite(s).all()
    assert bm25_raw("connection", nul)[0] > 0 and bm25_raw("connection", nul)[1] == 0
    with pytest.raises((TypeError, AttributeError)):
        general_scores("q", np.array([0.1, 0.2]), [None, 3])  # not texts


def test_search_params_check_the_rule():
    assert GeneralRule.of(SearchParams()) == GeneralRule()
    assert any("fusion" in p for p in SearchParams(fusion="weights").problems())
    assert any("general_bm25" in p for p in SearchParams(general_bm25=-1).problems())
    assert any("name_ramp" in p for p in SearchParams(name_ramp=2).problems())
    assert SearchParams().problems() == []


def test_train_ranker_ships_the_same_numbers():
    from training.train_ranker import RankerParams

    t, rule = RankerParams(), GeneralRule()
    assert (t.general_bm25, t.bm25_sd_floor, t.general_plain_floor, t.name_ramp) == (
        rule.bm25_weight,
        rule.names_floor,
        rule.plain_floor,
        rule.name_ramp,
    )
