import numpy as np

from retrieval.metrics import contains_answer, paired_bootstrap, per_query


def test_per_query_literals():
    m = per_query({"q1": {"a", "b"}, "q2": {"c"}}, {"q1": ["a", "x", "b"], "q2": []})
    assert m["recall@5"].tolist() == [1.0, 0.0]
    assert m["precision@5"].tolist() == [0.4, 0.0]
    assert m["mrr"].tolist() == [1.0, 0.0]
    assert round(m["ndcg@5"][0], 4) == round((1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3)), 4)


def test_paired_bootstrap():
    mean, lo, hi = paired_bootstrap(np.array([1.0, 1.0, 1.0, 0.0]), np.array([0.0, 0.0, 0.0, 0.0]))
    assert mean == 0.75 and 0 <= lo <= 0.75 <= hi <= 1
    assert paired_bootstrap(np.ones(50), np.ones(50)) == (0.0, 0.0, 0.0)


def test_contains_answer():
    assert contains_answer(["The war ended in  1922."], ["1922"])
    assert not contains_answer(["Yes it did."], ["yes"])
    assert not contains_answer(["nothing here"], ["1922"])
