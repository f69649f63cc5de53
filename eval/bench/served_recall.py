"""What a user's query gets end to end on SciFact (`pai lab bench served-recall`): each claim of a split asked through the
service's query path, scored by the share of its relevant abstracts (all of its qrels, whether the first stage found
them or not) in the served context. Evaluate's figures are over the claims whose candidates hold a relevant
abstract, a set that moves with the first stage; this one is over every claim, so two first stages, and the rankers
trained on their logs, compare on the same claims. This module is the pure part; `cli/lab/bench_served.py` serves."""

from __future__ import annotations

import numpy as np

from eval.retrieval_eval import doc_ids
from retrieval.contracts.metrics import paired_bootstrap


def claim_recall(sources: list[str], relevant: set[str], k: int) -> float:
    """The share of `relevant` abstracts among the documents of the first `k` served chunks."""
    return len(set(doc_ids(sources)[:k]) & relevant) / len(relevant)


def compare(old: dict[str, float], new: dict[str, float]) -> dict:
    """Both runs' means over the claims they share, and new minus old with its paired 95 % bootstrap interval."""
    common = sorted(set(old) & set(new))
    a, b = np.array([new[q] for q in common]), np.array([old[q] for q in common])
    diff, lo, hi = paired_bootstrap(a, b)
    return {
        "claims": len(common),
        "old": round(float(b.mean()), 4),
        "new": round(float(a.mean()), 4),
        "new_minus_old": [round(diff, 4), round(lo, 4), round(hi, 4)],
    }
