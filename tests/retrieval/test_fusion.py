"""The general order (retrieval/fusion.py): one rule for the first stage and the ranker's general weights."""

import numpy as np
import pytest

from retrieval.contracts.ranking_features import GENERAL_BM25, features, gated_scores
from retrieval.fusion import GeneralRule, bm25_raw, general_floor, general_order, general_scores, rare_share
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
    queries = ("what happens after debris collides in orbit", "What is the Kessler syndrome", "connection", "kessler")
    for query in queries:
        floor = general_floor(query, rule.names_floor, rule.plain_floor, rule.name_ramp, rule.rare_ramp)
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
    assert any("rare_ramp" in p for p in SearchParams(rare_ramp=-0.1).problems())
    assert SearchParams().problems() == []


def test_train_ranker_ships_the_same_numbers():
    from training.train_ranker import RankerParams

    t, rule = RankerParams(), GeneralRule()
    assert (t.general_bm25, t.bm25_sd_floor, t.general_plain_floor, t.name_ramp, t.rare_ramp) == (
        rule.bm25_weight,
        rule.names_floor,
        rule.plain_floor,
        rule.name_ramp,
        rule.rare_ramp,
    )


# the embedder's own vocabulary: ordinary words are one token each; jargon and coinages are word pieces
DOCSTRINGS = [  # candidates sharing a docstring's ordinary words, the answer sharing none
    "def cycle(self, *args): if not args: raise TypeError('no items for cycling given')",
    "def do_items(value): return the items of a mapping, in order",
    "def unique(seq): seen = set(); return [x for x in seq if not (x in seen or seen.add(x))]",
    "def first(seq): return next(iter(seq))",
]
JARGON = [  # candidates on one topic, the answer the only one holding the query's rare word
    "Antibiotics and the risk of a first acute myocardial infarction: macrolides in a cohort study.",
    "Aspirin and the risk of a first acute myocardial infarction in a cohort of older adults.",
    "Statins after acute myocardial infarction: a cohort study of mortality.",
    "Beta blockers and the risk of heart failure after myocardial infarction.",
]


def test_rare_share_reads_the_embedders_vocabulary():
    assert rare_share("Returns a list of unique items from the given sequence") == 0.0  # all one token each
    assert rare_share("macrolides protect against myocardial infarction") >= 0.4  # macrolides, myocardial: pieces
    assert rare_share("") == 0.0 and rare_share("2023 1999 ++") == 0.0  # no words, numbers only
    assert rare_share("数据库 连接") == 0.0  # a caseless script: plain words, the cosine-leaning order
    assert rare_share("café") == rare_share("cafe")  # accents stripped, as the embedder's tokenizer does
    assert rare_share("\x00" * 10) == 0.0 and rare_share("zq" * 100_000) == 1.0  # NUL; one huge non-word
    assert rare_share("Macrolides") == rare_share("macrolides") == 1.0  # as BM25 reads it: lowercased
    with pytest.raises((TypeError, AttributeError)):
        rare_share(None)


def test_a_rare_word_lowers_the_floor_and_a_query_in_the_vocabulary_keeps_it():
    rule = GeneralRule()
    args = (rule.names_floor, rule.plain_floor, rule.name_ramp)
    assert general_floor("items unique given", *args, rule.rare_ramp) == rule.plain_floor
    assert general_floor("macrolides protect against myocardial infarction", *args, rule.rare_ramp) == pytest.approx(
        rule.names_floor
    )
    # rare_ramp 0 (rankers saved before it): rare words are not read
    assert general_floor("macrolides protect against myocardial infarction", *args, 0.0) == rule.plain_floor


def test_bm25_following_ordinary_words_does_not_overrule_cosine():
    # the docstring's ordinary words ("items", "given", "unique") are all over the distractors; cosine prefers
    # the answer (2) by a little; with the plain floor BM25 may not push a distractor above it
    cos = np.array([0.40, 0.42, 0.45, 0.30])
    query = "Returns a list of unique items from the given sequence"
    raw = bm25_raw(query, DOCSTRINGS)
    assert raw.argmax() != 2  # BM25 alone follows the ordinary words down
    assert general_order(query, cos, DOCSTRINGS)[0] == 2
    low = GeneralRule(plain_floor=0.2, rare_ramp=0.0)  # plain words standardised in full: BM25 overrules
    assert general_order(query, cos, DOCSTRINGS, low)[0] != 2


def test_bm25_on_a_rare_word_moves_its_candidate_up():
    # cosine blurs "macrolides" into pieces and prefers a sibling abstract; BM25's rare-word evidence is decisive
    cos = np.array([0.60, 0.66, 0.62, 0.55])
    query = "macrolides protect against myocardial infarction"
    assert general_order(query, cos, JARGON)[0] == 0
    before = GeneralRule(plain_floor=2.0, rare_ramp=0.0)  # the same query read as plain words: cosine's order
    assert general_order(query, cos, JARGON, before)[0] == 1
