"""The cross-encoder's data and fusion fit (training/ce_data.py): what the fusion learns to trust, and the recall it reports.
(Pair building and the split are tested with the stage, in test_train_ce.py, beside the records they share.)"""

import torch

from retrieval.contracts.metrics import recall_at_k
from training.ce_data import fit_fusion, fused_recall, mean_recall


def groups_with(used_at: list[int], n: int = 6) -> list[dict]:
    return [{"query": f"q{i}", "texts": [f"t{j}" for j in range(n)], "used": [u]} for i, u in enumerate(used_at)]


def test_fusion_trusts_an_informative_model_and_ignores_a_useless_one():
    rng = torch.Generator().manual_seed(0)
    # the consumer uses position 0 half the time, else a late one that the model scores highest
    used_at = [0 if i % 2 else 3 + i % 3 for i in range(60)]
    groups = groups_with(used_at)
    informative = [
        [2.0 if j == g["used"][0] else float(torch.randn(1, generator=rng)) * 0.3 for j in range(6)] for g in groups
    ]
    fusion = fit_fusion(groups, informative, positions=4, lexical=False)
    assert fusion["ce_weight"] > 0 and len(fusion["rank_bias"]) == 4
    assert fused_recall(groups, informative, fusion, 1) > mean_recall(groups, None, 1) == 0.5
    # a model whose scores are noise: the fitted fusion keeps (about) the retrieval order's top pick
    always_first = groups_with([0] * 40)
    noise = [[float(x) for x in torch.randn(6, generator=rng)] for _ in always_first]
    useless = fit_fusion(always_first, noise, positions=4, lexical=False)
    assert fused_recall(always_first, noise, useless, 1) == mean_recall(always_first, None, 1) == 1.0
    assert useless["rank_bias"][0] > useless["rank_bias"][1]


def test_fusion_weighs_bm25_when_the_used_passage_shares_the_query_words():
    words = ["amylase", "glacier", "violin", "copper", "tundra", "saffron", "pylon", "quartz"]
    groups = [
        {"query": f"tell me about {w}", "texts": [f"filler text number {j}" for j in range(5)], "used": [i % 5]}
        for i, w in enumerate(words * 4)
    ]
    for g, w in zip(groups, words * 4):
        g["texts"][g["used"][0]] = f"all about {w} here"
    noise = [[0.0] * 5 for _ in groups]  # a model that knows nothing
    fusion = fit_fusion(groups, noise, positions=5)
    assert fusion["bm25_weight"] > 0 and fused_recall(groups, noise, fusion, 1) == 1.0
    assert fit_fusion(groups, noise, positions=5, lexical=False)["bm25_weight"] == 0.0


def test_recall_at_k():
    assert recall_at_k({0, 3}, [3, 1, 2], 2) == 0.5 and recall_at_k(set(), [0], 5) == 0.0
    groups = [{"query": "q", "texts": ["a", "b", "c"], "used": [2]}, {"query": "r", "texts": ["a", "b"], "used": [0]}]
    assert mean_recall(groups, None, 1) == 0.5  # retrieval order: the second query's first candidate is right
    assert mean_recall(groups, [[0.0, 0.1, 0.9], [0.5, 0.2]], 1) == 1.0
