"""Dedup at ingest: nothing that differs from what is stored is dropped. A new chunk is skipped only when it is an
exact duplicate (`duplicate_key`: the same heading path and text, normalised) of a stored chunk of another
document or of a chunk kept for the batch's earlier documents. Every other chunk is stored; one at or above
`ingest.near_threshold` (cosine) to its nearest is linked to it as near (`near_chunk_id`, `near_score`), so a note
that corrects an older one by a number, a date or a name stays beside it, and the context can say which of the
two is newer."""

from __future__ import annotations

from itertools import groupby
from typing import NamedTuple

import numpy as np

from ..chunking import Chunk
from ..params import IngestParams
from . import store
from .sources import Document

# a chunk identical to another once normalised is embedded alike (MiniLM's tokenizer lower-cases and splits on
# whitespace): only a stored nearest at least this close is read back to compare its text
IDENTICAL_MIN_COSINE = 0.98


class NewChunk(NamedTuple):
    """A chunk of a batch not stored for its document before."""

    k: int  # its document's position in the batch
    chunk: Chunk


def duplicate_key(parent_heading: str | None, heading: str | None, text: str, kind: str) -> str:
    """What two chunks must share to be duplicates: their parent heading, heading and text, each normalised. Prose
    (markdown, text) has its whitespace runs made one space, its ends trimmed and its case folded; code is taken
    exactly as it is (indentation and case are meaning there)."""
    parts = (parent_heading or "", heading or "", text)
    return "\x00".join(p if kind == "code" else " ".join(p.split()).casefold() for p in parts)


def dedup(
    new: list[NewChunk],
    keys: list[str],
    matrix: np.ndarray,
    in_store: list,
    stored: dict[int, tuple],
    docs: list[Document],
    params: IngestParams,
) -> tuple[set, dict]:
    """Per new chunk (`NewChunk`: its document's position k in `docs`, the chunk) with its `duplicate_key`, in batch
    order: an exact duplicate of its stored nearest (`stored`: chunk id -> (parent heading, heading, text), read for
    those at `IDENTICAL_MIN_COSINE`) or of a chunk kept for an earlier document of the batch is skipped; else the
    nearest of both (unit vectors: a dot product is the cosine) at or above `near_threshold` is linked.
    -> ({(k, hash)} skipped, {k: {hash: Near | BatchNear}} linked)."""
    skipped: set = set()
    near: dict[int, dict] = {}
    kept: list[int] = []  # rows of `matrix` kept for earlier documents of the batch
    kept_keys: dict[bool, set[str]] = {True: set(), False: set()}  # their keys, as code (exact) and as prose
    for k, group in groupby(range(len(new)), key=lambda j: new[j].k):
        rows = list(group)
        kind = docs[k].kind
        code = kind == "code"
        for j in rows:
            c, best = new[j].chunk, in_store[j]
            twin = stored.get(best.chunk_id) if best else None
            if keys[j] in kept_keys[code] or (twin and duplicate_key(*twin, kind) == keys[j]):
                skipped.add((k, c.content_hash))
                continue
            score = best.score if best else -1.0
            if kept:
                sims = matrix[kept] @ matrix[j]
                a = int(np.argmax(sims))
                if sims[a] > score:
                    score, other = float(sims[a]), new[kept[a]]
                    best = store.BatchNear(docs[other.k].source, other.chunk.content_hash, score)
            if score >= params.near_threshold:
                near.setdefault(k, {})[c.content_hash] = best
        for j in rows:
            c = new[j].chunk
            if (k, c.content_hash) not in skipped:
                kept.append(j)
                kept_keys[code].add(keys[j])
                kept_keys[not code].add(duplicate_key(c.parent_heading, c.heading, c.text, "text" if code else "code"))
    return skipped, near
