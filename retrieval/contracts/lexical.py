"""Lexical scoring: BM25 of a query against a handful of candidates (the learned ranker's keyword feature
and evaluate's `bm25` baseline), as bm25s scores it (`retrieval.fusion.bm25_raw`, shared with the first stage)."""

from __future__ import annotations

from ..fusion import bm25_raw, floored

__all__ = ["bm25_raw", "floored", "lexical_scores"]


def lexical_scores(
    query: str, texts: list[str], k1: float = 1.5, b: float = 0.75, sd_floor: float = 0.0
) -> list[float]:
    """BM25 of `query` against the candidates alone (`bm25_raw`), standardised within them (mean 0, sd 1; all 0
    when they do not differ): the fusion's keyword feature, the same in training and serving.

    `sd_floor` divides by max(sd, sd_floor) instead of sd: when every candidate contains the query's words
    (web-search snippets), each word's idf within them is ~0 and the raw scores differ only by term
    frequency and length; standardising would blow that noise up to a full-weight feature. Below the floor
    the feature shrinks in proportion (one rare query word matched by one of 20 candidates: sd ~0.2)."""
    return floored(bm25_raw(query, texts, k1, b), sd_floor) if texts else []
