import numpy as np
import pytest

from retrieval.contracts.metrics import contains_answer, paired_bootstrap, per_query


def test_per_query_literals():
    m = per_query({"q1": {"a", "b"}, "q2": {"c"}}, {"q1": ["a", "x", "b"], "q2": []})
    assert m["recall@5"].tolist() == [1.0, 0.0]
    assert m["precision@5"].tolist() == [0.4, 0.0]
    assert m["mrr"].tolist() == [1.0, 0.0]
    assert round(m["ndcg@5"][0], 4) == round((1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3)), 4)


def test_per_query_agrees_with_ranx():
    import ranx

    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(12)]
    relevant = {f"q{i:02d}": set(rng.choice(docs, rng.integers(1, 4), replace=False)) for i in range(60)}
    selected = {q: list(rng.choice(docs, rng.integers(0, 8), replace=False)) for q in relevant}
    ours = per_query(relevant, selected)
    qrels = ranx.Qrels({q: {d: 1 for d in rel} for q, rel in relevant.items()})
    run = ranx.Run(
        {q: {d: float(len(s) - i) for i, d in enumerate(s)} or {"__none__": 0.0} for q, s in selected.items()}
    )
    theirs = ranx.evaluate(qrels, run, list(ours), return_mean=False, make_comparable=True)  # in sorted qid order
    for metric, values in ours.items():
        np.testing.assert_allclose(values, theirs[metric], atol=1e-9, err_msg=metric)


def test_per_query_counts_a_repeated_id_once_and_refuses_unknown_metrics():
    m = per_query({"q": {"a"}}, {"q": ["a", "a", "a"]})
    assert m["precision@5"].tolist() == [0.2]
    with pytest.raises(ValueError, match="unknown metrics"):
        per_query({"q": {"a"}}, {"q": ["a"]}, metrics=("map",))


def test_paired_bootstrap():
    mean, lo, hi = paired_bootstrap(np.array([1.0, 1.0, 1.0, 0.0]), np.array([0.0, 0.0, 0.0, 0.0]))
    assert mean == 0.75 and 0 <= lo <= 0.75 <= hi <= 1
    assert paired_bootstrap(np.ones(50), np.ones(50)) == (0.0, 0.0, 0.0)


def test_contains_answer():
    assert contains_answer(["The war ended in  1922."], ["1922"])
    assert not contains_answer(["Yes it did."], ["yes"])
    assert not contains_answer(["nothing here"], ["1922"])
