"""The learned ranker's input contract: literal features and scores."""

import numpy as np
import pytest

from retrieval.contracts.lexical import lexical_scores
from retrieval.contracts.ranking_features import (
    FEATURES,
    GENERAL_BM25,
    adapt_query,
    domain_affinity,
    domain_gate,
    features,
    gated_scores,
    general_floor,
    name_share,
    ranker_scores,
    standardise,
)


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


def test_bm25_without_evidence_among_the_candidates_gets_no_weight():
    """Candidates that all contain the query's words (web-search snippets): each word's idf among them is ~0, the
    raw scores differ by length alone, and plain standardisation makes that noise a full-weight feature (sd 1).
    The floor shrinks it in proportion; where a word tells the candidates apart it changes nothing."""
    query = "solar eclipse duration"
    echo = [f"solar eclipse duration {' '.join(['filler'] * n)}" for n in range(0, 40, 2)]  # 20, as served
    plain, floored = np.array(lexical_scores(query, echo)), np.array(lexical_scores(query, echo, sd_floor=0.2))
    assert plain.std() == pytest.approx(1.0) and 0 < floored.std() < 0.1  # length noise: shrunk to < 0.1 of its weight
    assert list(np.argsort(-floored)) == list(np.argsort(-plain))  # same order, less weight
    telling = ["a total solar eclipse lasts minutes", "the moon orbits", "tides follow the moon", "duration of day"]
    assert lexical_scores(query, telling, sd_floor=0.2) == pytest.approx(lexical_scores(query, telling))
    assert np.array(lexical_scores(query, telling)).std() == pytest.approx(1.0)
    q = np.array([1.0, 0.0])
    angles = np.linspace(0.0, 1.0, 20)[::-1]  # cosine prefers the longer passages: the last is the best
    p = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    by_cosine = list(range(19, -1, -1))
    f = features(query, q, p, echo, None, bm25_sd_floor=0.2)
    assert list(f["bm25"]) == pytest.approx(list(floored))
    # the fusion of cosine with BM25 (general weights) keeps cosine's top 5 when BM25 has nothing to say
    assert list(np.argsort(-ranker_scores(f, {"similarity": 1.0, "bm25": 1.0}))[:5]) == by_cosine[:5]
    unfloored = features(query, q, p, echo, None)  # length noise at full weight: cosine's best drops out of the top 5
    assert 19 not in np.argsort(-ranker_scores(unfloored, {"similarity": 1.0, "bm25": 1.0}))[:5]


def test_domain_affinity_is_the_mean_of_the_k_nearest_train_queries():
    train = np.eye(4, dtype=np.float32)
    q = np.array([0.8, 0.6, 0.0, 0.0], dtype=np.float32)
    assert domain_affinity(q, train, 1) == pytest.approx(0.8)
    assert domain_affinity(q, train, 2) == pytest.approx(0.7)
    assert domain_affinity(train[0], train, 1, exclude_self=True) == pytest.approx(0.0)  # its own copy left out
    assert domain_affinity(q, train[:0], 3) == 0.0  # no train queries: nothing is in the domain


def test_the_gate_ramps_from_general_to_fitted_weights():
    assert domain_gate(0.1, 0.2, 0.3) == 0.0 and domain_gate(0.35, 0.2, 0.3) == 1.0
    assert domain_gate(0.25, 0.2, 0.3) == pytest.approx(0.5)
    assert domain_gate(0.3, 0.3, 0.3) == 1.0 and domain_gate(0.29, 0.3, 0.3) == 0.0  # no ramp: a step
    feats = {"similarity": np.array([1.0, -1.0]), "bm25": np.array([-1.0, 1.0])}
    fitted, general = {"similarity": 1.0}, {"bm25": 1.0}
    assert list(gated_scores(feats, fitted, general, 1.0)) == [1.0, -1.0]
    assert list(gated_scores(feats, fitted, general, 0.0)) == [-1.0, 1.0]
    assert np.allclose(gated_scores(feats, fitted, general, 0.25), [-0.5, 0.5])


def test_name_share_counts_capitalised_words_after_the_first():
    assert name_share("Which magazine was started first Arthur's Magazine or First for Women?") == 0.4
    assert name_share("Return the number of items in the list.") == 0.0
    assert name_share("parse a HTTP header from bytes") == 0.2  # an acronym names a thing
    assert name_share("how does HTTPAdapter retry") == pytest.approx(1 / 3)  # an identifier too
    assert (
        name_share("東京の人口は") == 0.0 and name_share("Paris") == 0.0 and name_share("") == 0.0
    )  # caseless, one word
    assert name_share("what is 3.14 in radians") == 0.0  # numbers are not words
    assert general_floor("Arthur's Magazine vs First for Women", 0.2, 1.0, 0.2) == pytest.approx(0.2)
    assert general_floor("return the number of items", 0.2, 1.0, 0.2) == pytest.approx(1.0)
    assert general_floor("parse a HTTP header from bytes today", 0.2, 1.0, 0.2) == pytest.approx(
        0.2 + 0.8 * (1 - 5 / 6)
    )
    assert general_floor("return the number of items", 0.2, 1.0, 0.0) == pytest.approx(
        0.2
    )  # ramp 0: always the names floor


def test_a_plain_word_query_keeps_cosines_best_where_one_shared_word_would_outvote_it():
    """The code-search failure: a plain-word query, cosine's best is the answer (no query word in it), and a
    lexical distractor holds one of the query's words that no other candidate has. Standardised, that one word is
    a z of ~4 and outvotes cosine; under the plain-word floor it keeps its raw size (~1) and cosine's best stays
    first. The general weights read that floor; the fitted ones keep theirs."""
    query = "count the lines of a file"
    texts = ["def wc(path): return sum(1 for _ in open(path))"] + [
        f"def helper{i}(x): return x + {i}" for i in range(18)
    ]
    texts.append("def split(text): return text.split()  # on lines")  # the lexical distractor: "lines"
    q = np.array([1.0, 0.0])
    angles = np.linspace(0.0, 1.2, 20)  # cosine: the first is the best, the distractor the worst
    p = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    f = features(query, q, p, texts, None, bm25_sd_floor=0.2, general_bm25_floor=1.0)
    assert f["bm25"].max() > 3.5 and 0.5 < f[GENERAL_BM25].max() < 1.5  # the same raw scores, two floors
    general = {"similarity": 1.0, "bm25": 1.0}
    assert np.argmax(gated_scores(f, {"bm25": 1.0}, general, 0.0)) == 0  # general weights: cosine's best stays first
    assert np.argmax(ranker_scores(f, general)) == 19  # under the names floor the one word wins
    assert gated_scores(f, {"bm25": 1.0}, general, 1.0) == pytest.approx(f["bm25"])  # the fitted path keeps its floor
    half = gated_scores(f, {"bm25": 1.0}, general, 0.5)
    assert half == pytest.approx(0.5 * f["bm25"] + 0.5 * (f["similarity"] + f[GENERAL_BM25]))
    assert GENERAL_BM25 not in features(query, q, p, texts, None, bm25_sd_floor=0.2)
