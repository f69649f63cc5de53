"""Search: HNSW cosine top-k, an optional keyword side fused by reciprocal rank, threshold, budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np
import psycopg
from pgvector import HalfVector
from psycopg.rows import args_row

from ..embed import Embedder
from ..params import SearchParams
from . import store_bm25
from .order import first_stage_order, fused_top, keyword_ranks


@dataclass(frozen=True)
class Candidate:
    rank: int  # 1-based position after fusion
    chunk_id: int
    source: str
    heading: str | None
    parent_heading: str | None
    start_line: int
    end_line: int
    text: str
    content_hash: str
    score: float  # cosine similarity to the query
    tokens: int
    vector_rank: int | None = None  # 1-based rank on the vector side, None if only keyword found it
    keyword_rank: int | None = None
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)  # the stored embedding
    date: str | None = None  # when its document was written (ISO 8601, UTC): a file's mtime, else when stored
    near_chunk_id: int | None = None  # the chunk of another document ingest found it near (cosine), if any
    # what past questions like the query cited of it: (similarity, share) each (`retrieval.logs.recall.evidence`)
    recalled: tuple[tuple[float, float], ...] = field(default=(), compare=False, repr=False)


class ChunkRow(NamedTuple):
    """One row of `search_vector`'s chunk query, its fields named as the query's columns."""

    id: int
    source: str
    heading: str | None
    parent_heading: str | None
    start_line: int
    end_line: int
    text: str
    content_hash: str
    tokens: int
    score: float  # cosine similarity to the query
    weight: float  # the chunk's usage weight (0 when the search reads no usage)
    embedding: HalfVector
    written_at: datetime  # its document's
    near_chunk_id: int | None


@dataclass(frozen=True)
class SearchResult:
    query: str
    candidates: list[Candidate]  # top_k, fused order
    threshold: float
    context: list[Candidate] = field(default_factory=list)  # what enters the prompt without a selector
    floor: int = 0  # search.min_chunks: `above` never holds fewer while there are candidates

    @property
    def above(self) -> list[Candidate]:
        """What the selector may show: the candidates at or above the threshold (`kept`)."""
        return kept(self.candidates, self.threshold, self.floor)

    @property
    def below_threshold(self) -> int:
        return len(self.candidates) - len(self.above)


def newer_than(candidates: list[Candidate]) -> dict[int, list[int]]:
    """rank -> the ranks of the candidates among `candidates` it is newer than: those near-linked with it (ingest's
    `near_chunk_id`, either way) whose document was written earlier. Ingest keeps both of two near chunks (a note
    and the one that corrects it); this says which one is later, not which one is right."""
    by_id = {c.chunk_id: c for c in candidates}
    out: dict[int, set[int]] = {}
    for c in candidates:
        other = by_id.get(c.near_chunk_id)
        if other is None or other.chunk_id == c.chunk_id or not (c.date and other.date):
            continue
        when, other_when = datetime.fromisoformat(c.date), datetime.fromisoformat(other.date)
        if when != other_when:
            new, old = (c, other) if when > other_when else (other, c)
            out.setdefault(new.rank, set()).add(old.rank)
    return {rank: sorted(older) for rank, older in sorted(out.items())}


def kept(candidates: list[Candidate], threshold: float, floor: int) -> list[Candidate]:
    """The candidates at or above `threshold`, in fused order, topped up with the best-fused ones below it to `floor`.

    The threshold trims a context's tail (a candidate that looks unrelated to the query does not spend the budget);
    it never empties or shortens a context below the floor: the first stage's top candidates are what a store
    has that looks most relevant, and a fixed cosine means different things for different embedders and corpora."""
    above = [c for c in candidates if c.score >= threshold]
    if len(above) >= floor:
        return above
    extra = {c.chunk_id for c in [c for c in candidates if c.score < threshold][: floor - len(above)]}
    return [c for c in candidates if c.score >= threshold or c.chunk_id in extra]


def take_budget(candidates: list[Candidate], token_budget: int, min_chunks: int) -> list[Candidate]:
    """Candidates top-down while they fit the budget; never fewer than `min_chunks` (if there are)."""
    out, used = [], 0
    for c in candidates:
        if used + c.tokens > token_budget and len(out) >= min_chunks:
            break
        out.append(c)
        used += c.tokens
    return out


_KEYWORD_SQL = {
    # OR of the query's stemmed terms (natural-language queries rarely match them all), ranked by
    # ts_rank with log-length normalisation (flag 1). On SciFact test this fused nDCG@10 0.700 vs
    # 0.608 for ts_rank_cd and 0.663 for vector alone (`pai lab cycle`).
    "fts": """
        SELECT chunk_id FROM chunk_terms,
             to_tsquery('english', replace(plainto_tsquery('english', %(q)s)::text, '&', '|')) AS q
        WHERE tsv @@ q {scoped} ORDER BY ts_rank(tsv, q, 1) DESC, chunk_id LIMIT %(k)s
    """,
    "trgm": """
        SELECT id FROM chunks WHERE %(q)s <%% text {scoped}
        ORDER BY word_similarity(%(q)s, text) DESC, id LIMIT %(k)s
    """,
}
# The vector side. Filtered by scope, pgvector's HNSW scan filters the ef_search nearest it found, which can
# leave fewer than k of a small scope among a large one: the iterative scan (pgvector 0.8) goes on until k pass
# the filter; its relaxed order is sorted again by distance.
_VECTOR_SQL = {
    False: "SELECT id FROM chunks ORDER BY embedding <=> %(v)s::halfvec LIMIT %(k)s",
    True: """
        WITH hits AS MATERIALIZED (
            SELECT id, embedding <=> %(v)s::halfvec AS d FROM chunks WHERE scope = ANY(%(scopes)s)
            ORDER BY d LIMIT %(k)s
        ) SELECT id FROM hits ORDER BY d, id
    """,
}


_WEIGHT = {False: "0::real", True: "coalesce(u.weight, 0)"}
_USAGE_JOIN = {False: "", True: "LEFT JOIN chunk_usage u ON u.chunk_id = c.id"}


def search(
    conn: psycopg.Connection,
    embedder: Embedder,
    query: str,
    params: SearchParams,
    usage: bool = False,
    scopes: list[str] | None = None,
) -> SearchResult:
    """Top-k candidates for `query` and the budgeted context drawn from those above threshold; `scopes`: the
    scopes the caller may read (None: every scope, for the offline tools that own the store)."""
    qvec = embedder.encode([query])[0]
    return search_vector(conn, query, qvec, params, usage=usage, scopes=scopes)


def keyword_rankings(
    conn: psycopg.Connection, query: str, params: SearchParams, scopes: list[str] | None = None
) -> list[list[int]]:
    """The keyword side's chunk-id rankings (none when hybrid is off), of chunks in `scopes` (None: all). It
    needs no embedding, so the service runs it on another connection while the query is being embedded."""
    if not params.hybrid or not query.strip():
        return []
    sides = ["fts", "trgm"] if params.keyword == "both" else [params.keyword]
    scoped = "" if scopes is None else "AND scope = ANY(%(scopes)s)"
    if sides == ["bm25"]:  # full text's best 2 x top_k, re-ranked by BM25 with the store's word statistics
        args = {"q": query, "k": store_bm25.PREFETCH * params.top_k, "scopes": scopes}
        ids = [i for (i,) in conn.execute(_KEYWORD_SQL["fts"].format(scoped=scoped), args)]
        return [store_bm25.best(conn, query, ids, params.top_k, scopes)]
    args = {"q": query, "k": params.top_k, "scopes": scopes}
    return [[i for (i,) in conn.execute(_KEYWORD_SQL[side].format(scoped=scoped), args)] for side in sides]


def search_vector(
    conn: psycopg.Connection,
    query: str,
    qvec: np.ndarray,
    params: SearchParams,
    keyword: list[list[int]] | None = None,
    usage: bool = False,
    scopes: list[str] | None = None,
) -> SearchResult:
    """Search with an embedded query; `keyword` = rankings already fetched by `keyword_rankings` (for the same
    `scopes`); `usage` re-orders the top-k by the chunks' usage weights (maintain.usage_prior); `scopes`: the
    scopes read (None: all). A document past its expiry (`documents.expires_at`) is skipped at once; until maintenance
    forgets it, it can hold one of the top_k places."""
    with conn.transaction():
        conn.execute(f"SET LOCAL hnsw.ef_search = {int(params.ef_search)}")
        if scopes is not None:
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        args = {"v": qvec, "k": params.top_k, "scopes": scopes}
        vector_ids = [i for (i,) in conn.execute(_VECTOR_SQL[scopes is not None], args)]
        rankings = [vector_ids] + (keyword_rankings(conn, query, params, scopes) if keyword is None else keyword)
        fused, scores = fused_top(rankings, params)
        named = conn.cursor(row_factory=args_row(ChunkRow))
        rows = named.execute(
            f"""
            SELECT c.id, c.source, c.heading, c.parent_heading, c.start_line, c.end_line, c.text,
                   c.content_hash, c.tokens, 1 - (c.embedding::vector <=> %s) AS score, {_WEIGHT[usage]}, c.embedding,
                   d.written_at, c.near_chunk_id
            FROM chunks c JOIN documents d ON d.id = c.document_id {_USAGE_JOIN[usage]}
            WHERE c.id = ANY(%s) AND (d.expires_at IS NULL OR d.expires_at > now())
            """,
            (qvec, fused),
        ).fetchall()
    by_id = {r.id: r for r in rows}
    krank = keyword_ranks(rankings[1:])
    fused = first_stage_order(
        query, fused, scores, by_id, krank, params, {r.id: r.weight for r in rows} if usage else None
    )
    vrank = {i: r for r, i in enumerate(vector_ids, start=1)}
    candidates = [
        Candidate(
            rank=n,
            chunk_id=r.id,
            source=r.source,
            heading=r.heading,
            parent_heading=r.parent_heading,
            start_line=r.start_line,
            end_line=r.end_line,
            text=r.text,
            content_hash=r.content_hash,
            tokens=r.tokens,
            score=float(r.score),
            vector_rank=vrank.get(r.id),
            keyword_rank=krank.get(r.id),
            vector=r.embedding.to_numpy().astype(np.float32),  # selectors score by it: no re-embedding
            date=r.written_at.astimezone(UTC).isoformat(timespec="seconds"),
            near_chunk_id=r.near_chunk_id,
        )
        for n, r in enumerate((by_id[i] for i in fused if i in by_id), start=1)
    ]
    above = kept(candidates, params.threshold, params.min_chunks)
    context = take_budget(above, params.token_budget, params.min_chunks)
    return SearchResult(query, candidates, params.threshold, context, params.min_chunks)
