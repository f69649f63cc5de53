"""The first stage's latency and Recall@5/@20, old code beside new, in one run on one store.

    python -m eval.bench.first_stage_latency --old /work/main/retrieval/query/search.py --domain data/domains/man.jsonl
    (--old-fusion /work/main/retrieval/fusion.py: the old search.py orders by that checkout's general order)
    python -m eval.bench.first_stage_latency --old-keyword fts --domain data/domains/man.jsonl
    (the old one is ours with another search.keyword)

Ingests a domain file's distinct candidates into a scratch database, embeds its queries once, then runs each
query's `search_vector` through the old module (a search.py from another checkout, loaded beside ours) and ours
(`search.fusion: general`), alternating which goes first, after a warm-up; prints each one's p50 and p90 and the
ratio of the p50s, and each one's Recall@5 and @20 over the queries with judged documents (the distinct documents of
the first k candidates; new minus old at 5 with its paired 95 % bootstrap CI). The keyword side runs inside the
call, as in `pai query`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from retrieval.contracts.metrics import paired_bootstrap
from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.db import connect, scratch_database
from retrieval.embed import get_embedder
from retrieval.params import IngestParams, SearchParams
from retrieval.query import search as ours


def load_old(path: Path, name: str = "retrieval.query._search_old"):
    """A module of another checkout (a search.py by default) beside ours: its relative imports resolve to ours."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = name.rpartition(".")[0]
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def run(conn, fns: dict, queries: list[tuple[str, object]], params: SearchParams, warm: int = 20):
    """Each query through each function, alternating which goes first: (name -> ms after the warm-up, name -> each
    query's candidates' sources)."""
    out = {name: [] for name in fns}
    sources = {name: [] for name in fns}
    for n, (text, qvec) in enumerate(queries):
        names = list(fns) if n % 2 else list(fns)[::-1]
        for name in names:
            t0 = time.perf_counter()
            result = fns[name](conn, text, qvec, params)
            if n >= warm:
                out[name].append((time.perf_counter() - t0) * 1000)
            sources[name].append([c.source for c in result.candidates])
    return out, sources


def recall(sources: list[list[str]], relevant: list[set[str]], k: int) -> np.ndarray:
    """Per query, the share of its relevant documents among the documents of its first k candidates."""
    return np.array([len(rel & set(list(dict.fromkeys(s))[:k])) / len(rel) for s, rel in zip(sources, relevant)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, help="the search.py to compare with (e.g. /work/main's)")
    ap.add_argument("--old-keyword", help="or: the old one is ours with this search.keyword (e.g. fts)")
    ap.add_argument("--old-fusion", type=Path, help="the fusion.py the old search.py orders by (default: ours)")
    ap.add_argument("--domain", type=Path, required=True, help="a contract-5 file (`pai lab bench build-domains`)")
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    if (args.old is None) == (args.old_keyword is None):
        ap.error("give --old or --old-keyword")
    old = load_old(args.old) if args.old else None
    if args.old_fusion and old:
        fusion = load_old(args.old_fusion, "retrieval._fusion_old")
        old.GeneralRule, old.general_order = fusion.GeneralRule, fusion.general_order
    items = [json.loads(line) for line in open(args.domain, encoding="utf-8")][: args.queries]
    docs = {c["id"]: c for it in items for c in it["candidates"]}
    embedder = get_embedder()
    params = SearchParams()
    with scratch_database("pai_latency") as url, connect(url) as conn:
        ingest_documents(
            conn,
            [Document(f"doc#{k}", "", c["text"], "text", c.get("title")) for k, c in enumerate(docs.values())],
            IngestParams(),
            params,
            embedder,
        )
        queries = [(it["query"], embedder.encode([it["query"]])[0]) for it in items if it.get("relevant_ids")]
        source_of = {cid: f"doc#{k}" for k, cid in enumerate(docs)}
        relevant = [{source_of[r] for r in it["relevant_ids"]} for it in items if it.get("relevant_ids")]
        old_side = replace(params, keyword=args.old_keyword or params.keyword)
        fns = {
            "old": (lambda c, q, v, _: ours.search_vector(c, q, v, old_side)) if old is None else old.search_vector,
            "new": ours.search_vector,
        }
        t, got = run(conn, fns, queries, params)
    p50 = {k: statistics.median(v) for k, v in t.items()}
    p90 = {k: statistics.quantiles(v, n=10)[-1] for k, v in t.items()}
    print(
        json.dumps(
            {
                "documents": len(docs),
                "queries": len(t["new"]),
                "p50_ms": p50,
                "p90_ms": p90,
                "ratio_p50": p50["new"] / p50["old"],
                "recall": {
                    f"@{k}": {name: round(float(recall(got[name], relevant, k).mean()), 4) for name in fns}
                    for k in (5, 20)
                },
                "new_minus_old_recall@5": paired_bootstrap(
                    recall(got["new"], relevant, 5), recall(got["old"], relevant, 5)
                ),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
