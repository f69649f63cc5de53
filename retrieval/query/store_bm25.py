"""BM25 of a query against a few candidates, with the store's own word statistics: each query word's idf counts
the chunks of the scopes read that hold it, so a word every chunk of a conversation holds (its speakers' names,
"good", "yeah") weighs nothing and a word few hold (a hobby, a place) weighs much.

The keyword side of the search (Postgres `ts_rank`) weighs every matched word alike, and BM25 over the 20
candidates alone (the general order's, `retrieval.fusion.bm25_raw`) sees only their own counts. With
`search.keyword: bm25` the keyword side re-ranks full text's best hits by this (`best`); the replay of orders over a
conversation's store (`eval/bench/memory_orders.py`) reads it too. Words are Postgres' english
lexemes (stemmed, stop words out), as the keyword side reads them. Costs one GIN count per query word, the candidates'
tsvectors (the length normalisation is against their mean) and, for a scoped search, a count of the scopes' chunks
on their index (the whole store's count is the planner's)."""

from __future__ import annotations

import psycopg

K1, B = 1.2, 0.75  # Lucene's defaults
PREFETCH = 2  # search.keyword bm25: full text's best PREFETCH x top_k are re-ranked

# The whole store's chunk count, as the planner last counted it (no scan of a large store on every query; until the
# table is first analysed, counted). A count that lags the store moves every word's idf alike, and ranks little.
_STORE_CHUNKS = """(SELECT CASE WHEN c.reltuples > 0 THEN c.reltuples::float8 ELSE (SELECT count(*) FROM chunk_terms)::float8
    END FROM pg_class c WHERE c.oid = 'chunk_terms'::regclass)"""

_SQL = """
    WITH words AS (SELECT lexeme FROM unnest(to_tsvector('english', %(q)s))),
    store AS (SELECT {chunks} AS n),
    idf AS (
        SELECT w.lexeme, ln(1 + (greatest(s.n, d.n) - d.n + 0.5) / (d.n + 0.5)) AS idf
        FROM words w CROSS JOIN store s,
             LATERAL (SELECT count(*)::float8 AS n FROM chunk_terms
                      WHERE tsv @@ quote_literal(w.lexeme)::tsquery {scoped}) d
        WHERE d.n > 0
    ),
    pool AS (SELECT chunk_id, tsv, greatest(length(tsv), 1)::float8 AS len FROM chunk_terms WHERE chunk_id = ANY(%(ids)s)),
    mean AS (SELECT greatest(avg(len), 1) AS len FROM pool)
    SELECT p.chunk_id, sum(idf.idf * f.tf * (%(k1)s + 1) / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * p.len / m.len)))
    FROM pool p CROSS JOIN mean m CROSS JOIN (SELECT array_agg(lexeme) AS a FROM idf) q
         -- the candidate's entries for the query's words, marked (weight A) and kept: a few rows, not its whole vector
         CROSS JOIN LATERAL unnest(ts_filter(setweight(p.tsv, 'A', q.a), '{{a}}')) u
         JOIN idf ON idf.lexeme = u.lexeme
         CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) f
    GROUP BY p.chunk_id
"""


def store_bm25(
    conn: psycopg.Connection, query: str, ids: list[int], scopes: list[str] | None = None
) -> dict[int, float]:
    """chunk id -> BM25 of `query` for those of `ids` that hold a query word (the others score 0 and are left out),
    idf over the chunks of `scopes` (None: the whole store). A scope's statistics never read another's chunks."""
    if not ids or not query.strip():
        return {}
    scoped = "" if scopes is None else "AND scope = ANY(%(scopes)s)"
    chunks = (
        _STORE_CHUNKS if scopes is None else "(SELECT count(*)::float8 FROM chunk_terms WHERE scope = ANY(%(scopes)s))"
    )
    args = {"q": query, "ids": ids, "scopes": scopes, "k1": K1, "b": B}
    return {int(i): float(s) for i, s in conn.execute(_SQL.format(scoped=scoped, chunks=chunks), args) if s > 0}


def best(conn: psycopg.Connection, query: str, ids: list[int], k: int, scopes: list[str] | None = None) -> list[int]:
    """The `k` of `ids` with the highest `store_bm25`, best first (ties by id); those without a query word left out."""
    scores = store_bm25(conn, query, ids, scopes)
    return sorted(scores, key=lambda i: (-scores[i], i))[:k]
