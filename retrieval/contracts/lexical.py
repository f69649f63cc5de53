"""Lexical scoring: BM25 of a query against a handful of candidates (the learned ranker's keyword feature
and evaluate's `bm25` baseline), as bm25s scores it."""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

import numpy as np

_BM25_WORD = re.compile(
    r"(?u)\b\w\w+\b"
)  # bm25s.tokenize's defaults: lowercased words of 2+ characters, English stopwords out


@functools.cache
def _bm25_stopwords() -> frozenset[str]:
    # heavy (bm25s loads numba and scipy, ~0.5 s): at first use, not with `pai --help`
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _bm25_terms(text: str) -> list[str]:
    stop = _bm25_stopwords()
    return [w for w in _BM25_WORD.findall(text.lower()) if w not in stop]


def bm25_raw(query: str, texts: list[str], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 of `query` against the candidates alone (their own idf): bm25s's scores (Lucene variant, its default
    tokenizer), computed directly: bm25s builds a sparse index, which costs more than the scoring on 20 passages."""
    docs = [Counter(_bm25_terms(t)) for t in texts]
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    raw = np.zeros(len(texts))
    if lengths.sum() > 0:
        norm = k1 * ((1 - b) + b * lengths / lengths.mean())
        for word in _bm25_terms(query):  # a repeated query word counts each time, as in bm25s
            tf = np.array([d.get(word, 0) for d in docs], dtype=np.float64)
            df = int(np.count_nonzero(tf))
            if df:
                raw += math.log(1 + (len(docs) - df + 0.5) / (df + 0.5)) * tf / (norm + tf)
    return raw


def floored(raw: np.ndarray, sd_floor: float = 0.0) -> list[float]:
    """(raw - mean) / max(sd, sd_floor); all 0 when the scores do not differ."""
    sd = raw.std() if len(raw) else 0.0
    return [0.0] * len(raw) if sd < 1e-9 else [float(x) for x in (raw - raw.mean()) / max(sd, sd_floor)]


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
