"""Metrics are pure: (relevant, selected) -> numbers, shared by training and evaluation. Recall@k,
nDCG@k, MRR, the per-query table (ranx's definitions), the bootstrap intervals and answer containment
(a few lines each)."""

from __future__ import annotations

import math
import re

import numpy as np

K = 5  # picks per query: every metric below and the deploy gate read the top 5
METRICS = ("recall@5", "precision@5", "ndcg@5", "mrr")


def per_query(relevant: dict[str, set[str]], selected: dict[str, list[str]], metrics=METRICS) -> dict[str, np.ndarray]:
    """Per-query metric arrays (in `relevant`'s order) for selections ranked best first: ranx's definitions
    (binary relevance; precision@k over k; MRR uncut), computed directly. ranx itself JIT-compiles them
    with numba in every new process, minutes on a 2-core machine; the tests check both agree."""
    fns = {
        "recall@5": lambda rel, ranked: recall_at_k(rel, ranked, K),
        "precision@5": lambda rel, ranked: len(rel & set(ranked[:K])) / K,
        "ndcg@5": lambda rel, ranked: ndcg_at_k(rel, ranked, K),
        "mrr": mrr,
    }
    unknown = set(metrics) - set(fns)
    if unknown:
        raise ValueError(f"per_query: unknown metrics {sorted(unknown)}")
    ranked = {q: list(dict.fromkeys(selected.get(q, []))) for q in relevant}  # a repeated id counts once
    return {m: np.array([fns[m](relevant[q], ranked[q]) for q in relevant], dtype=float) for m in metrics}


def recall_at_k(relevant: set, ranked: list, k: int) -> float:
    """Share of the relevant items among the first k ranked (0 when nothing is relevant)."""
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def weighted_recall_at_k(weights: dict, ranked: list, k: int) -> float:
    """Recall@k with a weight per relevant item (`weights`: id -> weight > 0): the weighted share of the relevant
    among the first k. With inverse-propensity weights it is the self-normalised unbiased estimate of Recall@k
    from exposure labels (an item the consumer could only cite because exploration showed it stands for the
    many like it the policy hid); all weights 1, it is `recall_at_k`."""
    total = sum(weights.values())
    return sum(w for d, w in weights.items() if d in set(ranked[:k])) / total if total else 0.0


def recall_vs_exact(found: list[list[int]], truth) -> float:
    """Mean recall of each query's found ids against its exact top k (rows of ids, a list or an array)."""
    return float(np.mean([recall_at_k(set(np.asarray(t).tolist()), f, len(f)) for f, t in zip(found, truth)]))


def ndcg_at_k(relevant: set, ranked: list, k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def mrr(relevant: set, ranked: list) -> float:
    return next((1 / (i + 1) for i, d in enumerate(ranked) if d in relevant), 0.0)


def mean_ci(values: np.ndarray, seed: int = 0, n: int = 2000) -> tuple[float, float, float]:
    """Mean and its 95 % bootstrap interval (values resampled with replacement)."""
    v = np.asarray(values, float)
    if len(v) == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), (n, len(v)))].mean(axis=1)
    return float(v.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a - b and its 95 % bootstrap interval (queries resampled with replacement)."""
    return mean_ci(np.asarray(a, float) - np.asarray(b, float), seed=seed, n=n)


def contains_answer(texts: list[str], answers: list[str]) -> bool:
    """Whether the selected context holds a reference answer (yes/no answers cannot be checked)."""
    norm = lambda s: re.sub(r"\s+", " ", s.lower()).strip()  # noqa: E731
    context = norm(" ".join(texts))
    return any(norm(a) and norm(a) not in ("yes", "no") and norm(a) in context for a in answers)
