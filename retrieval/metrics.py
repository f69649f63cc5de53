"""Metrics are pure: (relevant, selected) -> numbers. IR metrics come from ranx; the paired bootstrap
and answer containment are ours (a few lines of numpy)."""

from __future__ import annotations

import re
import warnings

import numpy as np

METRICS = ("recall@5", "precision@5", "ndcg@5", "mrr")


def per_query(relevant: dict[str, set[str]], selected: dict[str, list[str]], metrics=METRICS) -> dict[str, np.ndarray]:
    """Per-query metric arrays (in `relevant`'s order) for selections ranked best first."""
    import ranx

    qids = list(relevant)
    qrels = ranx.Qrels({q: {d: 1 for d in relevant[q]} for q in qids})
    # ranx wants scores: rank r of n gets n - r; a query with an empty selection gets a dummy miss
    run = ranx.Run({q: ({d: float(len(selected[q]) - i) for i, d in enumerate(selected[q])} or {"__none__": 0.0}) for q in qids})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ranx.evaluate(qrels, run, list(metrics), return_mean=False, make_comparable=True)
    return {m: np.asarray(out[m], dtype=float) for m in metrics}


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a - b and its 95 % bootstrap interval (queries resampled with replacement)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), (n, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def contains_answer(texts: list[str], answers: list[str]) -> bool:
    """Whether the selected context holds a reference answer (yes/no answers cannot be checked)."""
    norm = lambda s: re.sub(r"\s+", " ", s.lower()).strip()  # noqa: E731
    context = norm(" ".join(texts))
    return any(norm(a) and norm(a) not in ("yes", "no") and norm(a) in context for a in answers)
