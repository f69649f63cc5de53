"""The feedback log's rankings, the learned ranker's data: per query of a split, every labelled candidate in
retrieval order with the positions the consumer used and their inverse-propensity weights (`rankings`), and
Recall@k of an order over them, naive (`mean_recall`) and unbiased (`ips_recall`); the vectors of every query
and candidate (`embed_groups`); every split's rankings of a pulled log, its labels read once (`feedback_groups`).

Splits are the build stage's (`split_of`, by query text), so val matches the LLM selector's; a band of the
train queries next to val is held out as *calibration* (`split_of3`): the ranker's adapter never trains on
them, and its fusion weights are fitted on them, where the adapted scores are as honest as on val.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from retrieval.contracts.metrics import recall_at_k
from retrieval.contracts.passage import passage_text
from retrieval.embed import get_embedder
from retrieval.logs.feedback_records import above_threshold, ipw, normalize_query, query_position, split_of
from retrieval.logs.used import label_changes, used_labels
from retrieval.params import UsedParams


def split_of3(query: str, val_fraction: float, calibration_fraction: float) -> str:
    """ "val" as the build stage splits, else "calibration" for the next band of `calibration_fraction`, else "train"."""
    if split_of(query, val_fraction) == "val":
        return "val"
    return "calibration" if query_position(query) < val_fraction + calibration_fraction else "train"


def rankings(
    records: list[dict],
    split: str,
    val_fraction: float,
    calibration_fraction: float = 0.0,
    ipw_clip: float = 1.0,
) -> list[dict]:
    """A split's queries as the selector sees them: `{"query", "texts"}` of every candidate with a text (not
    changed or deleted since) in retrieval order, `used`, the 0-based positions the consumer used (queries with
    none are left out), and `weights`, each labelled candidate's inverse-propensity weight (`ipw`; `ipw_clip`
    1 = all 1, no correction). The labels are read as given: `records` come relabelled by the one definition of
    used (`retrieval.logs.used.used_labels`, which train_ranker applies once to the whole log).

    A candidate without a label (not in the consumer's context) stays in, at weight 0 and never in `used`: the
    listwise softmax runs over all of a query's candidates, the unlabelled at target 0 (with the weights an
    unbiased estimate of the loss a judge of all 20 would give, Ai et al. 2018), and a held-out estimate must
    rank all of them. On labelled candidates alone every order of the ~5 that were shown puts all of them in the
    top 5, and the estimate says 1.000 for any ranker; among all 20 an order that hides a cited chunk loses it.

    `votes`: 1 / how many of the split's queries ask the same question (`normalize_query`): one question, one vote,
    so a question the user (or a trial's traffic) asks twenty times teaches its labels, not twenty times their
    weight."""
    out = []
    for rec in records:
        if split_of3(rec["query"], val_fraction, calibration_fraction) != split:
            continue
        cands = [c for c in above_threshold(rec) if c["text"] is not None]
        used = [i for i, c in enumerate(cands) if c["used"]]
        if used:
            out.append(
                {
                    "query": rec["query"],
                    "texts": [passage_text(c["heading"], c["text"], c.get("parent_heading")) for c in cands],
                    "used": used,
                    "weights": [ipw(c, ipw_clip) if c["used"] is not None else 0.0 for c in cands],
                    "ids": [str(c.get("chunk_id")) for c in cands],  # what past questions cited is read by chunk id
                    "scope": rec.get("scope"),
                }
            )
    asked = Counter(normalize_query(g["query"]) for g in out)
    for g in out:
        g["votes"] = 1.0 / asked[normalize_query(g["query"])]
    return out


def feedback_groups(
    records: list[dict], used: UsedParams, val_fraction: float, calibration_fraction: float, ipw_clip: float
) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """(each split's rankings, what the one definition of used changed) from the pulled records: their labels
    read once by `used_labels`, then `rankings` per split."""
    labelled = [used_labels(r, used) for r in records]
    groups = {
        s: rankings(labelled, s, val_fraction, calibration_fraction, ipw_clip) for s in ("train", "calibration", "val")
    }
    return groups, label_changes(records, labelled)


def ips_recall(groups: list[dict], scores: list[list[float]] | None, k: int) -> float:
    """Self-normalised inverse-propensity estimate of Recall@k (scores None: the retrieval order): per query,
    the weighted used candidates in the top k over all weighted used ones (`weights`), averaged. With labels
    from exposure alone the naive Recall@k (`mean_recall`) of the order that chose what was shown is ~1, marking
    its own homework; an explored chunk's 1/propensity stands in for the ones like it that were never shown."""
    per = ips_recalls(groups, scores, k)
    return float(np.mean(per)) if per else 0.0


def ips_recalls(groups: list[dict], scores: list[list[float]] | None, k: int) -> list[float]:
    """`ips_recall` per query (for paired intervals)."""
    out = []
    for i, g in enumerate(groups):
        order = list(range(len(g["texts"])))
        if scores is not None:
            order.sort(key=lambda j: -scores[i][j])
        w = g.get("weights") or [1.0] * len(g["texts"])
        top = set(order[:k])
        out.append(sum(w[j] for j in g["used"] if j in top) / sum(w[j] for j in g["used"]))
    return out


def mean_recall(groups: list[dict], scores: list[list[float]] | None, k: int) -> float:
    """Mean Recall@k over `groups` ranked by `scores` (best first); None = their retrieval order."""
    total = 0.0
    for i, g in enumerate(groups):
        order = list(range(len(g["texts"])))
        if scores is not None:
            order.sort(key=lambda j: -scores[i][j])
        total += recall_at_k(set(g["used"]), order, k)
    return total / len(groups) if groups else 0.0


def embed_groups(groups_by_split: dict[str, list[dict]], progress=None) -> None:
    """Adds `q` (query vector) and `P` (candidate vectors) to every group, each distinct text embedded at most once."""
    embedder = get_embedder()
    groups = [g for gs in groups_by_split.values() for g in gs]
    queries = list(dict.fromkeys(g["query"] for g in groups))
    passages = list(dict.fromkeys(t for g in groups for t in g["texts"]))
    vecs = dict(zip(queries, embedder.encode(queries)))
    for i in range(0, len(passages), 512):  # passages through the vector cache: those stored at ingest are looked up
        batch = passages[i : i + 512]
        vecs.update(zip(batch, embedder.encode_passages(batch)))
        if progress:
            progress(min(i + 512, len(passages)), len(passages))
    for g in groups:
        g["q"], g["P"] = vecs[g["query"]], np.stack([vecs[t] for t in g["texts"]])
