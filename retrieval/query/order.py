"""The first stage's order, pure: reciprocal rank fuses the sides' rankings and picks the top_k, the general order
(`retrieval.fusion`) orders them, the usage prior moves them, and a top_k led by a conversation's chunk is ordered
by the conversation order (`retrieval.dialogue`). `search.search_vector` runs it on the rows it reads; the memory
replay (`eval/bench/memory_orders.py`) on a store read once."""

from __future__ import annotations

import math

import numpy as np

from ..dialogue import conversation_order, session_key
from ..fusion import GeneralRule, general_order
from ..params import SearchParams


def rrf_scores(rankings: list[list[int]], k: int) -> dict[int, float]:
    """Reciprocal rank fusion scores: sum of 1/(k + rank) per id, in first-seen order."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for r, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + r)
    return scores


def rrf(rankings: list[list[int]], k: int) -> list[int]:
    """Reciprocal rank fusion: ids ordered by sum of 1/(k + rank); ties keep first-seen order."""
    scores = rrf_scores(rankings, k)
    return sorted(scores, key=lambda i: -scores[i])


def with_usage_prior(ids: list[int], scores: dict[int, float], weights: dict[int, float]) -> list[int]:
    """`ids` (the fused top-k) re-ordered by score * exp(usage weight): the prior moves a chunk within
    the candidates, never out of them; a chunk without a weight keeps its score."""
    return sorted(ids, key=lambda i: -scores[i] * math.exp(weights.get(i, 0.0)))


def fused_order(
    query: str, fused: list[int], rrf: dict[int, float], rows: dict, params: SearchParams
) -> tuple[list[int], dict[int, float]]:
    """The fused top-k in the order the context is drawn from, and each one's score for the usage prior. With
    `search.fusion: general` (a keyword side on) the candidates RRF found are ordered by the general order
    (`retrieval.fusion`: cosine, and BM25 as far as its evidence goes), each scored 1 / (rrf_k + its position),
    so the usage prior moves it as it moves a fused one; `rrf` (or vector only) keeps the reciprocal-rank order."""
    ids = [i for i in fused if i in rows]
    if params.fusion != "general" or not params.hybrid:
        return ids, rrf
    # headings and text, as BM25 reads them
    texts = [f"{rows[i].parent_heading or ''} {rows[i].heading or ''} {rows[i].text}" for i in ids]
    cosines = np.array([rows[i].score for i in ids], dtype=np.float64)
    ordered = [ids[p] for p in general_order(query, cosines, texts, GeneralRule.of(params))]
    return ordered, {i: 1.0 / (params.rrf_k + n) for n, i in enumerate(ordered, start=1)}


def fused_top(rankings: list[list[int]], params: SearchParams) -> tuple[list[int], dict[int, float]]:
    """Reciprocal rank's top_k of the sides' rankings (the vector side's first), and every id's fused score."""
    scores = rrf_scores(rankings, params.rrf_k)
    return sorted(scores, key=lambda i: -scores[i])[: params.top_k], scores


def keyword_ranks(rankings: list[list[int]]) -> dict[int, int]:
    """id -> its best 1-based rank on the keyword sides."""
    out: dict[int, int] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking, start=1):
            out[i] = min(r, out.get(i, r))
    return out


def first_stage_order(
    query: str,
    fused: list[int],
    scores: dict[int, float],
    rows: dict,
    keyword_rank: dict[int, int],
    params: SearchParams,
    weights: dict[int, float] | None = None,
) -> list[int]:
    """The fused top_k in the first stage's order: the general order (`fused_order`), moved by the usage prior when
    `weights` are given, then, led by a conversation's chunk, the conversation order with the keyword side's ranks.
    `rows`: id -> a row with the chunk's source, heading, parent_heading, text and cosine `score`."""
    fused, scores = fused_order(query, fused, scores, rows, params)
    if weights is not None:
        fused = with_usage_prior(fused, scores, weights)
    if params.conversation_keyword > 0 and fused and session_key(rows[fused[0]].source, rows[fused[0]].text):
        fused = conversation_order(fused, keyword_rank, params.conversation_keyword, params.conversation_rrf_k)
    return fused
