"""The learned fusion a cross-encoder is served with: its scores combined with the retrieval order's prior
and the candidates' BM25 (weights fitted by `training.ce_data.fit_fusion`, saved with the model). Not the
reciprocal-rank fusion of hybrid search (`retrieval.query.search.rrf`)."""

from __future__ import annotations

from .lexical import lexical_scores


def fuse_scores(scores: list[float], fusion: dict | None, lexical: list[float] | None = None) -> list[float]:
    """A cross-encoder's scores for candidates in retrieval order, fused with that order's prior and,
    when the fusion has a `bm25_weight`, the candidates' `lexical_scores` (`train_ce`'s fitted fusion:
    ce_weight * score + rank_bias[position] + bm25_weight * lexical); None = the scores alone."""
    if not fusion:
        return list(scores)
    bias, w_lex = fusion["rank_bias"], fusion.get("bm25_weight", 0.0)
    if w_lex and (lexical is None or len(lexical) != len(scores)):
        raise ValueError("this fusion weighs BM25: pass the candidates' lexical_scores")
    return [
        fusion["ce_weight"] * x + bias[min(i, len(bias) - 1)] + (w_lex * lexical[i] if w_lex else 0.0)
        for i, x in enumerate(scores)
    ]


def fuse_for(query: str, texts: list[str], scores: list[float], fusion: dict | None) -> list[float]:
    """`fuse_scores` for one query's candidate passages, their BM25 computed only if the fusion weighs it."""
    needs_lexical = bool(fusion and fusion.get("bm25_weight"))
    return fuse_scores(scores, fusion, lexical_scores(query, texts) if needs_lexical else None)
