"""BM25 over a query's candidates, standardised within them: the lexical side the ranker and the bm25 baseline read."""

import json
from pathlib import Path

import pytest

from retrieval.contracts.lexical import lexical_scores


def hotpotqa_sets(path: Path, n: int) -> list[tuple[str, list[tuple[str | None, str]]]]:
    """(question, 20 (title, paragraph)): each question's own 10 and the next question's 10."""
    items = []
    for line in open(path, encoding="utf-8"):
        items.append(json.loads(line))
        if len(items) > n:
            break
    items = [it for it in items if len(it["candidates"]) == 10]
    cands = lambda it: [(c.get("title"), c["text"]) for c in it["candidates"]]  # noqa: E731
    return [(a["query"], cands(a) + cands(b)) for a, b in zip(items, items[1:])][:n]


def scifact_sets(folder: Path, n: int) -> list[tuple[str, list[tuple[str | None, str]]]]:
    """(claim, 20 (title, abstract)): the claims in file order, each with the next 20 abstracts of the corpus."""
    claims, docs = [], []
    for line in open(folder / "queries.jsonl", encoding="utf-8"):
        claims.append(json.loads(line)["text"])
        if len(claims) >= n:
            break
    for line in open(folder / "corpus.jsonl", encoding="utf-8"):
        d = json.loads(line)
        docs.append((d["title"] or None, d["text"]))
        if len(docs) >= 20 * len(claims):
            break
    return [(c, docs[20 * i : 20 * i + 20]) for i, c in enumerate(claims)]


def test_lexical_scores_are_bm25_standardised_within_the_candidates():
    lex = lexical_scores(
        "amylase starch", ["Amylase digests starch.", "Cars have wheels.", "Starch is a sugar chain.", "Snow."]
    )
    assert lex[0] > lex[2] > lex[1] == lex[3] and sum(lex) == pytest.approx(0.0, abs=1e-9)
    assert lexical_scores("zebra", ["a b", "c d"]) == [0.0, 0.0] and lexical_scores("q", []) == []


def test_lexical_scores_equal_bm25s_on_real_candidates(benchmark_dir):
    """The direct BM25 gives bm25s's scores (standardised the same way) on real 20-candidate sets and edge cases."""
    import bm25s
    import numpy as np

    from retrieval.contracts.passage import passage_text

    def reference(query: str, texts: list[str]) -> list[float]:
        retriever = bm25s.BM25()
        words = bm25s.tokenize(query, show_progress=False, return_ids=False)[0]
        try:
            with np.errstate(invalid="ignore", divide="ignore"):
                retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
                raw = (
                    np.nan_to_num(np.asarray(retriever.get_scores(words), dtype=np.float64))
                    if words
                    else np.zeros(len(texts))
                )
        except ValueError:  # bm25s refuses an empty vocabulary
            raw = np.zeros(len(texts))
        return [0.0] * len(texts) if raw.std() < 1e-9 else list((raw - raw.mean()) / raw.std())

    sets = [
        (q, [passage_text(heading, text) for heading, text in cs])
        for q, cs in scifact_sets(benchmark_dir / "scifact", 25)
        + hotpotqa_sets(benchmark_dir / "hotpotqa" / "test.jsonl", 25)
    ]
    sets += [
        ("the of and", ["the of", "a b"]),
        ("cell cell cells", ["cell", "cells cell", "x"]),
        ("x", ["", ""]),
        ("", ["ab cd", "ef gh"]),
        ("ab", ["ab ab", "ab"]),
        ("Émile's DNA-repair", ["émile dna repair", "DNA", "repair repair"]),
    ]
    for query, texts in sets:
        assert lexical_scores(query, texts) == pytest.approx(reference(query, texts), abs=1e-5), query
