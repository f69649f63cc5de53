"""The cross-encoder's data, from pulled feedback records: pairs with hard negatives, whole rankings
per query, Recall@k, and the fusion of its scores with the retrieval order.

Splits are the build stage's (`split_of`, by query text), so train/val match the LLM selector's; a
band of the train queries next to val is held out as *calibration*: no pair of theirs trains the
model, and the fusion weights are fitted on them, where the model's scores are as honest as on val.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from retrieval.contracts.ce_input import ce_passage
from retrieval.contracts.learned_fusion import fuse_for
from retrieval.contracts.lexical import lexical_scores
from retrieval.contracts.metrics import recall_at_k
from retrieval.logs.feedback import ipw, normalize_query, query_position, shown_candidates, split_of


def split_of3(query: str, val_fraction: float, calibration_fraction: float) -> str:
    """ "val" as the build stage splits, else "calibration" for the next band of `calibration_fraction`, else "train"."""
    if split_of(query, val_fraction) == "val":
        return "val"
    return "calibration" if query_position(query) < val_fraction + calibration_fraction else "train"


def labelled(rec: dict, skipped: Counter) -> list[dict]:
    """The shown candidates that carry a text and a used/ignored label (the rest are counted)."""
    out = []
    for c in shown_candidates(rec):
        if c["text"] is None:
            skipped["candidate text changed or deleted"] += 1
        elif c["used"] is None:
            skipped["candidate without used/ignored label"] += 1
        else:
            out.append(c)
    return out


def negatives(cands: list[dict], cap: int, rng: random.Random) -> tuple[list[dict], int]:
    """All hard negatives (ignored, ranked above a used candidate), then a seeded sample of the other
    ignored ones up to `cap` (0 = all). Returns (negatives in rank order, how many were hard)."""
    last_used = max(c["rank"] for c in cands if c["used"])
    hard = [c for c in cands if not c["used"] and c["rank"] < last_used]
    rest = [c for c in cands if not c["used"] and c["rank"] > last_used]
    room = len(rest) if cap == 0 else max(0, cap - len(hard))
    fill = rng.sample(rest, min(room, len(rest)))
    return sorted(hard + fill, key=lambda c: c["rank"]), len(hard)


def build_pairs(
    records: list[dict],
    val_fraction: float,
    max_negatives_per_query: int,
    seed: int = 13,
    pair_tokens: Callable[[str, str], int] | None = None,
    max_length: int = 256,
    calibration_fraction: float = 0.0,
) -> tuple[dict[str, list[dict]], dict]:
    """Pairs `{"query", "text", "label"}` by split (train, val, calibration) from feedback records, and the counts.

    Queries without a used or without an ignored candidate teach a pairwise model nothing and are
    skipped; a (query, passage) seen before (a replayed query, a duplicated chunk) is kept once.
    `pair_tokens(query, passage)` (the model's tokenizer) counts the pairs `max_length` truncates."""
    rng = random.Random(seed)
    pairs: dict[str, list[dict]] = {"train": [], "val": [], "calibration": []}
    skipped, seen = Counter(), set()
    hard_total = truncated = 0
    for rec in records:
        if all(c["used"] is None for c in rec["candidates"]):
            skipped["query without used/ignored labels"] += 1
            continue
        cands = labelled(rec, skipped)
        if not any(c["used"] for c in cands):
            skipped["query without a used candidate"] += 1
            continue
        if all(c["used"] for c in cands):
            skipped["query without an ignored candidate"] += 1
            continue
        split = split_of3(rec["query"], val_fraction, calibration_fraction)
        negs, hard = negatives(cands, max_negatives_per_query, rng)
        hard_total += hard
        for c in [c for c in cands if c["used"]] + negs:  # positives first: a conflicting duplicate stays positive
            text = ce_passage(c["heading"], c["text"], c.get("parent_heading"))
            key = (normalize_query(rec["query"]), text)
            if key in seen:
                skipped["duplicate pair"] += 1
                continue
            seen.add(key)
            pairs[split].append({"query": rec["query"], "text": text, "label": int(c["used"])})
            truncated += pair_tokens is not None and pair_tokens(rec["query"], text) > max_length
    stats = {
        "train_pairs": len(pairs["train"]),
        "val_pairs": len(pairs["val"]),
        "calibration_pairs": len(pairs["calibration"]),
        "train_positives": sum(p["label"] for p in pairs["train"]),
        "hard_negatives": hard_total,
        "truncated_pairs": int(truncated),
        "skipped": dict(skipped),
    }
    return pairs, stats


def rankings(
    records: list[dict],
    split: str,
    val_fraction: float,
    calibration_fraction: float = 0.0,
    ipw_clip: float = 1.0,
    unlabelled: bool = False,
) -> list[dict]:
    """A split's queries as the selector sees them: `{"query", "texts"}` of every labelled candidate in
    retrieval order (a candidate never shown has no label, so it is left out: never a negative), `used`, the
    0-based positions the consumer used (queries with none are left out), and `weights`, each labelled
    candidate's inverse-propensity weight (`ipw`; `ipw_clip` 1 = all 1, no correction).

    `unlabelled` keeps the candidates without a label too (weight 0, never in `used`): what a held-out estimate
    must rank. On labelled candidates alone every order of the ~5 that were shown puts all of them in the top 5,
    and the estimate says 1.000 for any ranker; among all 20 an order that hides a cited chunk loses it."""
    out = []
    for rec in records:
        if split_of3(rec["query"], val_fraction, calibration_fraction) != split:
            continue
        cands = [c for c in shown_candidates(rec) if c["text"] is not None] if unlabelled else labelled(rec, Counter())
        used = [i for i, c in enumerate(cands) if c["used"]]
        if used:
            out.append(
                {
                    "query": rec["query"],
                    "texts": [ce_passage(c["heading"], c["text"], c.get("parent_heading")) for c in cands],
                    "used": used,
                    "weights": [ipw(c, ipw_clip) if c["used"] is not None else 0.0 for c in cands],
                }
            )
    return out


def ips_recall(groups: list[dict], scores: list[list[float]] | None, k: int) -> float:
    """Self-normalised inverse-propensity estimate of Recall@k (scores None: the retrieval order): per query,
    the weighted used candidates in the top k over all weighted used ones (`weights`), averaged. With labels
    from exposure alone the naive Recall@k (`mean_recall`) of the order that chose what was shown is ~1, marking
    its own homework; an explored chunk's 1/propensity stands in for the ones like it that were never shown."""
    total = 0.0
    for i, g in enumerate(groups):
        order = list(range(len(g["texts"])))
        if scores is not None:
            order.sort(key=lambda j: -scores[i][j])
        w = g.get("weights") or [1.0] * len(g["texts"])
        top = set(order[:k])
        total += sum(w[j] for j in g["used"] if j in top) / sum(w[j] for j in g["used"])
    return total / len(groups) if groups else 0.0


def mean_recall(groups: list[dict], scores: list[list[float]] | None, k: int) -> float:
    """Mean Recall@k over `groups` ranked by `scores` (best first); None = their retrieval order."""
    total = 0.0
    for i, g in enumerate(groups):
        order = list(range(len(g["texts"])))
        if scores is not None:
            order.sort(key=lambda j: -scores[i][j])
        total += recall_at_k(set(g["used"]), order, k)
    return total / len(groups) if groups else 0.0


def fit_fusion(
    groups: list[dict], scores: list[list[float]], positions: int = 20, l2: float = 1e-2, lexical: bool = True
) -> dict:
    """The weights of `retrieval.contracts.learned_fusion.fuse_scores`: score = ce_weight * model score + rank_bias[position]
    (+ bm25_weight * the candidates' standardised BM25), fitted by a listwise softmax likelihood of the
    used candidates of each query (a ranking objective, like Recall@k).

    The position term is the retrieval order's prior (a candidate ranked first is used more often), the
    BM25 term the keyword evidence a small model misses (rare names, numbers); the model's weight says
    how much its own evidence moves a candidate past them. A feature that does not help gets weight 0;
    with both weights 0 the fused ranking is the retrieval order."""
    import torch

    if not groups:
        return {"ce_weight": 0.0, "rank_bias": [0.0] * positions, "bm25_weight": 0.0}
    n = max(len(g["texts"]) for g in groups)
    s, lex = torch.zeros(len(groups), n), torch.zeros(len(groups), n)
    pos = torch.zeros(len(groups), n, dtype=torch.long)
    mask = torch.zeros(len(groups), n, dtype=torch.bool)
    used = torch.zeros(len(groups), n)
    for i, g in enumerate(groups):
        m = len(g["texts"])
        s[i, :m] = torch.tensor(scores[i], dtype=torch.float32)
        if lexical:
            lex[i, :m] = torch.tensor(lexical_scores(g["query"], g["texts"]), dtype=torch.float32)
        pos[i, :m] = torch.arange(m).clamp(max=positions - 1)
        mask[i, :m] = True
        used[i, g["used"]] = 1.0 / len(g["used"])
    scale = s[mask].std().clamp_min(1e-6)  # fit on unit-scale scores, report in the model's own units
    a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    bias = torch.zeros(positions, requires_grad=True)
    opt = torch.optim.LBFGS([a, b, bias], max_iter=300, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        z = (a * s / scale + b * lex + bias[pos]).masked_fill(~mask, float("-inf"))
        loss = -(torch.log_softmax(z, dim=1).masked_fill(~mask, 0.0) * used).sum(1).mean() + l2 * (
            a**2 + b**2 + (bias**2).mean()
        )
        loss.backward()
        return loss

    opt.step(closure)
    return {
        "ce_weight": round(max(0.0, float(a.detach()) / float(scale)), 6),
        "rank_bias": [round(float(x), 6) for x in bias.detach()],
        "bm25_weight": round(max(0.0, float(b.detach())), 6) if lexical else 0.0,
    }


def fused_recall(groups: list[dict], scores: list[list[float]], fusion: dict, k: int) -> float:
    return mean_recall(groups, [fuse_for(g["query"], g["texts"], s, fusion) for g, s in zip(groups, scores)], k)
