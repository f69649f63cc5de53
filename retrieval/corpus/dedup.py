"""Dedup at ingest: each new chunk against the stored chunks of other documents and the chunks kept for the
batch's earlier documents; at or above `ingest.dup_threshold` (cosine) it is skipped as a duplicate, at or
above `ingest.near_threshold` it is linked to its nearest as near."""

from __future__ import annotations

from itertools import groupby

import numpy as np

from ..params import IngestParams
from . import store


def dedup(new: list, matrix: np.ndarray, in_store: list, plans: list, params: IngestParams) -> tuple[set, dict]:
    """Per new chunk (plan index k, chunk), in batch order: the nearest of the stored chunks of other documents
    and of the chunks kept for this batch's earlier documents (unit vectors: a dot product is the cosine).
    -> ({(k, hash)} skipped as duplicates, {k: {hash: Near | BatchNear}} linked as near)."""
    skipped: set = set()
    near: dict[int, dict] = {}
    kept: list[int] = []  # rows of `matrix` kept for earlier documents of the batch
    for k, group in groupby(range(len(new)), key=lambda j: new[j][0]):
        rows = list(group)
        for j in rows:
            c, best = new[j][1], in_store[j]
            score = best.score if best else -1.0
            if kept:
                sims = matrix[kept] @ matrix[j]
                a = int(np.argmax(sims))
                if sims[a] > score:
                    score, (ka, ca) = float(sims[a]), new[kept[a]]
                    best = store.BatchNear(plans[ka][0].source, ca.content_hash, score)
            if score >= params.dup_threshold:
                skipped.add((k, c.content_hash))
            elif score >= params.near_threshold:
                near.setdefault(k, {})[c.content_hash] = best
        kept += [j for j in rows if (k, new[j][1].content_hash) not in skipped]
    return skipped, near
