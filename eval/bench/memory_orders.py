"""Orders of a conversation's chunks, replayed (`pai lab bench memory-orders`): what each order puts into the served
context of every LoCoMo question, scored as `pai lab bench memory` scores it, in milliseconds per order.

A conversation is ingested once into a scratch store (`cli/lab/bench_memory.py`); `read_store` reads what an order can
use: every chunk, its stored vector and text, each question's cosine to every chunk, BM25 of the question with the
store's word statistics (`retrieval.query.store_bm25`), and the keyword side's ranking. An order is a function of
that and a question: chunk positions, best first. Its context is cut as the service cuts a first-stage order with
no selector (`context`): the candidates at or above the threshold, the first `DEFAULT_K` of them, the
conversation fill to `search.conversation_tokens`, the token budget; `served` replays the first stage itself
(vector and keyword sides fused by reciprocal rank, the general order, the conversation order), exact where the
store's HNSW is (a store of one conversation)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import psycopg

from eval.bench import memory
from retrieval.contracts.selection import DEFAULT_K
from retrieval.embed import Embedder
from retrieval.fusion import standardise
from retrieval.params import SearchParams
from retrieval.query.order import first_stage_order, fused_top, keyword_ranks
from retrieval.query.search import Candidate, kept, keyword_rankings, take_budget
from retrieval.query.shaping import fill
from retrieval.query.store_bm25 import store_bm25


@dataclass
class Store:
    """One conversation's store as an order reads it; rows of `cos`, `bm25`, `hits` are its questions."""

    conv: memory.Conversation
    questions: list[memory.Question]
    candidates: list[Candidate]  # every chunk, rank 0 (an order ranks them)
    passages: list[str]  # as BM25 reads a candidate (heading path and text)
    cos: np.ndarray  # questions x chunks
    bm25: np.ndarray  # questions x chunks, 0 where no query word
    keyword: list[list[int]]  # per question, the keyword side's ranking (chunk positions, best first, top_k)
    hits: list[np.ndarray]  # per question, evidence turns x chunks: the turn's text is in the chunk


Order = Callable[[Store, int, SearchParams], list[int]]


def read_store(conn: psycopg.Connection, conv: memory.Conversation, embedder: Embedder, sp: SearchParams) -> Store:
    """Every chunk of the scratch store `conn` holds `conv` in, and what each of its questions scores them."""
    rows = conn.execute(
        "SELECT id, source, heading, parent_heading, start_line, end_line, text, content_hash, tokens, embedding"
        " FROM chunks ORDER BY id"
    ).fetchall()
    ids = [r[0] for r in rows]
    vectors = np.stack([r[9].to_numpy().astype(np.float32) for r in rows])
    candidates = [Candidate(0, *r[:8], 0.0, r[8], vector=v) for r, v in zip(rows, vectors)]
    questions = [q for q in conv.questions if q.evidence]
    qvecs = embedder.encode([q.text for q in questions])
    at = {i: n for n, i in enumerate(ids)}
    bm25 = np.zeros((len(questions), len(ids)))
    keyword = []
    for j, q in enumerate(questions):
        for i, s in store_bm25(conn, q.text, ids).items():
            bm25[j, at[i]] = s
        keyword.append([at[i] for i in (keyword_rankings(conn, q.text, sp) or [[]])[0]])
    turns = conv.turns
    hits = [
        np.array([[memory.norm(turns[e]) in memory.norm(c.text) for c in candidates] for e in q.evidence])
        for q in questions
    ]
    passages = [f"{c.parent_heading or ''} {c.heading or ''} {c.text}" for c in candidates]
    return Store(conv, questions, candidates, passages, qvecs @ vectors.T, bm25, keyword, hits)


def served(s: Store, j: int, sp: SearchParams) -> list[int]:
    """The first stage as `retrieval.query.search` orders it (no usage prior): the vector side's and keyword side's
    top_k fused by reciprocal rank, in `first_stage_order`."""
    cos = s.cos[j]
    vector = [int(i) for i in np.argsort(-cos, kind="stable")[: sp.top_k]]
    keyword = s.keyword[j][: sp.top_k] if sp.hybrid else []  # read at the store's top_k; the search reads this many
    fused, scores = fused_top([vector, keyword], sp)
    rows = {i: replace(s.candidates[i], score=float(cos[i])) for i in fused}
    return first_stage_order(s.questions[j].text, fused, scores, rows, keyword_ranks([keyword]), sp)


def _whole_store(score: Callable[[Store, int], np.ndarray]) -> Order:
    return lambda s, j, sp: [int(i) for i in np.argsort(-score(s, j), kind="stable")]


def _ranks(x: np.ndarray) -> np.ndarray:
    r = np.empty(len(x))
    r[np.argsort(-x, kind="stable")] = np.arange(1, len(x) + 1)
    return r


ORDERS: dict[str, Order] = {
    "served": served,
    "cosine": _whole_store(lambda s, j: s.cos[j]),
    "bm25": _whole_store(lambda s, j: s.bm25[j]),
    "rrf": _whole_store(lambda s, j: 1 / (10 + _ranks(s.cos[j])) + 1 / (10 + _ranks(s.bm25[j]))),
    "z_sum": _whole_store(lambda s, j: standardise(s.cos[j]) + standardise(s.bm25[j])),
    "oracle": _whole_store(lambda s, j: s.hits[j].sum(axis=0).astype(np.float64)),
}
"""The orders replayed: the served first stage; over the whole store: cosine, BM25 with the store's word
statistics, their reciprocal-rank fusion (k 10) and the sum of their standardised scores; and the oracle, which
reads the answers (the chunks holding most evidence turns first): what the context's tokens allow."""


def context(s: Store, j: int, order: list[int], sp: SearchParams) -> list[int]:
    """The positions `order` puts into the context, cut as the service cuts a first-stage order (module docstring)."""
    ranked = [replace(s.candidates[i], rank=n, score=float(s.cos[j, i])) for n, i in enumerate(order, start=1)]
    shown = kept(ranked, sp.threshold, sp.min_chunks)
    chosen = fill(shown[:DEFAULT_K], shown, sp.conversation_tokens)
    at = {c.chunk_id: n for n, c in enumerate(s.candidates)}
    return [at[c.chunk_id] for c in take_budget(chosen, sp.token_budget, sp.min_chunks)]


def replay(stores: list[Store], sp: SearchParams, orders: dict[str, Order] = ORDERS) -> dict[str, dict]:
    """Per order, `memory.score` of its contexts over every store's questions, and their mean tokens."""
    out = {}
    for name, order in orders.items():
        records, tokens = [], []
        for s in stores:
            for j, q in enumerate(s.questions):
                took = context(s, j, order(s, j, sp), sp)
                records.append({"category": q.category, "found": [bool(h[took].any()) for h in s.hits[j]]})
                tokens.append(sum(s.candidates[i].tokens for i in took))
        out[name] = memory.score(records) | {"tokens_mean": round(float(np.mean(tokens)), 1)}
    return out
