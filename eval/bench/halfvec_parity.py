"""The store's switch to halfvec (migration 012), checked on real data: first-stage Recall@5 on SciFact test, per
query, on one database before and after the migration, vector order and hybrid.

    git checkout a5df9e1 && python -m eval.bench.halfvec_parity before before.json   # ingest SciFact, schema 011
    git checkout <this> && python -m eval.bench.halfvec_parity after after.json      # connect() migrates: 012
    python -m eval.bench.halfvec_parity compare before.json after.json

(a5df9e1 has no copy of this file: copy it in.) The database `pai_halfvec_check` on the default server is left
for inspection; drop it when done."""

import json
import sys
from dataclasses import replace

import psycopg
from psycopg.conninfo import make_conninfo

from eval.retrieval_eval import doc_ids, load_scifact
from retrieval.contracts.metrics import recall_at_k
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect, database_url
from retrieval.embed import get_embedder
from retrieval.params import BENCHMARK_DIR, IngestParams, SearchParams, load_section
from retrieval.query.search import search_vector


def main() -> None:
    phase, out = sys.argv[1], sys.argv[2]
    if phase == "compare":
        b, a = json.load(open(out)), json.load(open(sys.argv[3]))
        for k in b:
            n = len(b[k])
            print(
                f"{k}: Recall@5 {sum(b[k]) / n:.4f} -> {sum(a[k]) / n:.4f}, {sum(x != y for x, y in zip(b[k], a[k]))} of {n} queries differ"
            )
        return
    base = database_url()
    name = "pai_halfvec_check"
    if phase == "before":
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(base, dbname=name)
    emb = get_embedder()
    sp = load_section("params.yaml", "search", SearchParams)
    with connect(url) as conn:
        if phase == "before":
            r = ingest_paths(
                conn,
                [BENCHMARK_DIR / "scifact" / "corpus.jsonl"],
                load_section("params.yaml", "ingest", IngestParams),
                sp,
                emb,
            )
            print("ingested", r.chunks_inserted, flush=True)
        print(
            conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid='chunks'::regclass AND attname='embedding'"
            ).fetchone()
        )
        print(
            conn.execute(
                "SELECT pg_size_pretty(pg_relation_size('chunks_embedding_hnsw')), pg_size_pretty(pg_total_relation_size('chunks'))"
            ).fetchone()
        )
        qs = load_scifact(BENCHMARK_DIR, "test")
        qv = emb.encode([q for _, q, _ in qs])
        res = {}
        for label, p in (("vector", replace(sp, hybrid=False)), ("hybrid", replace(sp, hybrid=True))):
            res[label] = [
                recall_at_k(rel, doc_ids([c.source for c in search_vector(conn, t, v, p).candidates]), 5)
                for (_, t, rel), v in zip(qs, qv)
            ]
            print(label, sum(res[label]) / len(qs), flush=True)
    json.dump(res, open(out, "w"))


if __name__ == "__main__":
    main()
