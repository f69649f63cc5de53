"""The learned ranker's input contract (RANKER_FORMAT): the features a ranker scores candidates by, and
how its fitted weights combine them. Shared by training (`training.train_ranker`), evaluation and
serving (`serving.ranker`), so the three compute the same numbers.

For one query and its candidates in retrieval order, every feature is a vector over the candidates,
standardised within them (mean 0, sd 1; 0 when they do not differ), so a weight means the same on a
list of 10 as on a list of 20:
- `similarity`: cosine of the query and passage embeddings (all-MiniLM-L6-v2, as stored);
- `adapted`: cosine after the *query adapter* (q' = q + q W, W learned from feedback, 0 = the base
  model): the domain's way of asking, learned without re-embedding a passage;
- `bm25`: BM25 of the query over the candidates (`retrieval.lexical.lexical_scores`);
- `prior`: -log(1 + position) in retrieval order (the first stage's own ranking).
score = sum of weight x feature. Weights are fitted on held-out queries; a weight of 0 drops a feature.
"""

from __future__ import annotations

import numpy as np

from .lexical import lexical_scores

RANKER_FORMAT = "ranker-input/1"
FEATURES = ("similarity", "adapted", "bm25", "prior")


def standardise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)


def adapt_query(q: np.ndarray, adapter: np.ndarray | None) -> np.ndarray:
    """The query vector through the adapter (q + q W), L2-normalised; None = the base vector."""
    if adapter is None:
        return q
    v = q + q @ adapter
    n = np.linalg.norm(v)
    return v / n if n > 0 else q


def features(
    query: str,
    query_vec: np.ndarray,
    passage_vecs: np.ndarray,
    texts: list[str],
    adapter: np.ndarray | None,
    lexical: bool = True,
) -> dict[str, np.ndarray]:
    """Every feature of the candidates (rows of `passage_vecs`, in retrieval order), standardised."""
    n = len(texts)
    return {
        "similarity": standardise(passage_vecs @ query_vec),
        "adapted": standardise(passage_vecs @ adapt_query(query_vec, adapter)),
        "bm25": np.asarray(lexical_scores(query, texts) if lexical else np.zeros(n)),
        "prior": standardise(-np.log1p(np.arange(n))),
    }


def ranker_scores(feats: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    """The ranker's score per candidate: the weighted sum of its features."""
    n = len(next(iter(feats.values())))
    return sum((w * feats[name] for name, w in weights.items() if w), np.zeros(n))
