"""The learned ranker's input contract: literal features and scores."""

import numpy as np
import pytest

from retrieval.lexical import lexical_scores
from retrieval.ranking_features import FEATURES, adapt_query, features, ranker_scores, standardise


def test_standardise_and_constant_lists():
    assert standardise(np.array([1.0, 2.0, 3.0])) == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-4)
    assert list(standardise(np.array([0.5, 0.5]))) == [0.0, 0.0]  # nothing to tell apart: no signal


def test_adapter_zero_or_none_is_the_base_model():
    q = np.array([0.6, 0.8], dtype=np.float32)
    assert list(adapt_query(q, None)) == pytest.approx([0.6, 0.8])
    assert list(adapt_query(q, np.zeros((2, 2), dtype=np.float32))) == pytest.approx([0.6, 0.8])
    swap = np.array([[-1.0, 1.0], [1.0, -1.0]], dtype=np.float32)  # q + q W = (0.8, 0.6): the axes swapped
    assert list(adapt_query(q, swap)) == pytest.approx([0.8, 0.6])


def test_features_and_weighted_scores():
    q = np.array([1.0, 0.0])
    p = np.array([[0.0, 1.0], [1.0, 0.0], [0.6, 0.8]])
    texts = ["snow is cold", "amylase digests starch", "starch and sugar"]
    f = features("what digests starch", q, p, texts, None)
    assert set(f) == set(FEATURES)
    assert np.argmax(f["similarity"]) == 1 and list(f["adapted"]) == pytest.approx(list(f["similarity"]))
    assert list(f["bm25"]) == pytest.approx(lexical_scores("what digests starch", texts))
    assert f["prior"][0] > f["prior"][1] > f["prior"][2]  # retrieval order: first is best
    only_prior = ranker_scores(f, {"prior": 1.0})
    assert list(np.argsort(-only_prior)) == [0, 1, 2]
    mix = ranker_scores(f, {"similarity": 1.0, "bm25": 0.5, "adapted": 0.0, "prior": 0.0})
    assert mix == pytest.approx(f["similarity"] + 0.5 * f["bm25"])
    assert list(features("q", q, p, texts, None, lexical=False)["bm25"]) == [0.0, 0.0, 0.0]
