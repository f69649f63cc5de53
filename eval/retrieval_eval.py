"""Retrieval quality on SciFact (BEIR qrels): does the first stage put the relevant abstracts in the
20 candidates the selector will see? Vector-only and hybrid side by side, in one run."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg

from retrieval.contracts.metrics import mrr, ndcg_at_k, recall_at_k
from retrieval.embed import Embedder
from retrieval.params import SearchParams
from retrieval.query.search import search_vector


def load_scifact(benchmark_dir: Path, split: str) -> list[tuple[str, str, set[str]]]:
    """(query id, claim, relevant corpus ids) for the queries that have qrels in `split`."""
    sf = benchmark_dir / "scifact"
    rel: dict[str, set[str]] = {}
    with open(sf / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0:
                rel.setdefault(row["query-id"], set()).add(row["corpus-id"])
    texts = {}
    for line in open(sf / "queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        texts[q["_id"]] = q["text"]
    return [(qid, texts[qid], docs) for qid, docs in rel.items()]


def doc_ids(sources: list[str]) -> list[str]:
    """Corpus ids in rank order, one per document (a document can have several chunks): a corpus record's id
    after its `#`, a note's file name without its suffix (`pai lab notes` names each note by its id)."""
    return list(dict.fromkeys(s.rsplit("#", 1)[-1] if "#" in s else Path(s).stem for s in sources))


def evaluate(
    conn: psycopg.Connection,
    embedder: Embedder,
    queries: list[tuple[str, str, set[str]]],
    base: SearchParams,
    advance: Callable[[], None] = lambda: None,
) -> list[dict]:
    systems = {
        "vector (HNSW)": replace(base, hybrid=False),
        f"hybrid (vector + {base.keyword}, RRF)": replace(base, hybrid=True),
    }
    qvecs = embedder.encode([q for _, q, _ in queries])
    rows = []
    for name, sp in systems.items():
        scores: dict[str, list[float]] = {"recall@5": [], "recall@20": [], "ndcg@10": [], "mrr": []}
        times = []
        for (_, text, relevant), v in zip(queries, qvecs):
            t0 = time.perf_counter()
            result = search_vector(conn, text, v, sp)
            times.append(time.perf_counter() - t0)
            ranked = doc_ids([c.source for c in result.candidates])
            scores["recall@5"].append(recall_at_k(relevant, ranked, 5))
            scores["recall@20"].append(recall_at_k(relevant, ranked, 20))
            scores["ndcg@10"].append(ndcg_at_k(relevant, ranked, 10))
            scores["mrr"].append(mrr(relevant, ranked))
            advance()
        rows.append(
            {
                "system": name,
                "queries": len(queries),
                **{k: round(float(np.mean(v)), 4) for k, v in scores.items()},
                "sql_p50_ms": round(float(np.percentile(times, 50)) * 1000, 2),
            }
        )
    return rows
