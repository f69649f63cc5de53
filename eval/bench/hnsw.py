"""`pai lab bench retrieval`: pgvector HNSW at scale, measured side by side in one run.

Vectors are real all-MiniLM-L6-v2 embeddings of the benchmark texts (SciFact abstracts, HotpotQA
paragraphs; cut to their first 300 characters so embedding takes ~2 min once, then cached), topped
up to the asked size with mixtures of two real vectors plus a little noise. Uniformly random vectors
would make every distance nearly equal and recall meaningless. Queries are real SciFact claims.
Exact top-k comes from numpy over the same float32 vectors.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from pgvector import HalfVector
from rich.table import Table

from retrieval.contracts.metrics import recall_vs_exact
from retrieval.db import connect, pai_home
from retrieval.embed import get_embedder
from retrieval.params import EmbedParams, SearchParams
from retrieval.query import staging
from retrieval.query.search import Candidate, SearchResult

SCHEMA = "pai_bench"
REAL_TEXT_CHARS = 300


def benchmark_texts(benchmark_dir: Path) -> tuple[list[str], list[str]]:
    """(passages, queries): SciFact abstracts then HotpotQA paragraphs; SciFact claims."""
    sf = benchmark_dir / "scifact"
    passages = []
    for line in open(sf / "corpus.jsonl", encoding="utf-8"):
        r = json.loads(line)
        passages.append(f"{r['title']}\n{r['text']}")
    for split in ("train", "dev", "test"):
        for line in open(benchmark_dir / "hotpotqa" / f"{split}.jsonl", encoding="utf-8"):
            passages += [f"{c['title']}\n{c['text']}" for c in json.loads(line)["candidates"]]
    queries = [json.loads(line)["text"] for line in open(sf / "queries.jsonl", encoding="utf-8")]
    return list(dict.fromkeys(passages)), queries


def embed_cached(texts: list[str], ep: EmbedParams, progress: bool) -> np.ndarray:
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = pai_home() / "cache" / f"bench-minilm-{key}.npy"
    if path.exists():
        return np.load(path)
    vecs = get_embedder(ep).encode(texts, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def top_up(real: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """`real` plus mixtures (1-l)*a + l*b + noise, l ~ U(0, 0.5), normalised, up to n rows."""
    if n <= len(real):
        return real[:n]
    rng = np.random.default_rng(seed)
    m = n - len(real)
    a, b = rng.integers(0, len(real), m), rng.integers(0, len(real), m)
    lam = rng.uniform(0, 0.5, (m, 1)).astype(np.float32)
    mix = (1 - lam) * real[a] + lam * real[b] + rng.normal(0, 0.01, (m, real.shape[1])).astype(np.float32)
    mix /= np.linalg.norm(mix, axis=1, keepdims=True)
    return np.vstack([real, mix.astype(np.float32)])


def exact_top_k(base: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ base.T
    idx = np.argpartition(-sims, k, axis=1)[:, :k]
    order = np.take_along_axis(sims, idx, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(idx, order, axis=1)


def percentile_ms(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(seconds) * 1000, q)), 2)


STORAGES = {"vector": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops"}  # column type -> HNSW opclass


def run(
    n_vectors: int,
    n_queries: int,
    ef_values: list[int],
    sp: SearchParams,
    ep: EmbedParams,
    benchmark_dir: Path,
    progress_factory: Callable,
    storages: tuple[str, ...] = ("vector",),
) -> dict:
    """Each storage (`vector`: float32; `halfvec`: float16, half the bytes) built and searched in turn, in
    one run, over the same vectors and queries; recall is against exact float32 top-k."""
    if not storages or any(st not in STORAGES for st in storages) or len(set(storages)) != len(storages):
        raise ValueError(f"storages: one or more of {', '.join(STORAGES)}, each once")
    k = sp.top_k
    passages, claims = benchmark_texts(benchmark_dir)
    n_real = min(n_vectors, len(passages))
    real = embed_cached([p[:REAL_TEXT_CHARS] for p in passages[:n_real]], ep, progress=True)
    base = top_up(real, n_vectors)
    qvecs = embed_cached(claims[:n_queries], ep, progress=False)
    truth = exact_top_k(base, qvecs, k)
    out: dict = {
        "vectors": n_vectors,
        "real_vectors": n_real,
        "mixture_vectors": n_vectors - n_real,
        "dim": base.shape[1],
        "queries": len(qvecs),
        "k": k,
        "hnsw": {"m": sp.hnsw_m, "ef_construction": sp.hnsw_ef_construction},
    }
    out["storages"] = []
    with connect() as conn, progress_factory() as bar:
        for storage in storages:
            out["storages"].append(_one_storage(conn, storage, base, qvecs, truth, ef_values, sp, bar))
    out["staging"] = bench_staging(passages, n_queries, k)
    out["targets"] = {"p50_ms": 10, "p95_ms": 25, "recall_at_k": 0.95, "staging_ms": 2}
    return out


def _one_storage(conn, storage: str, base, qvecs, truth, ef_values: list[int], sp: SearchParams, bar) -> dict:
    dim, k = base.shape[1], sp.top_k
    out: dict = {"storage": storage}
    conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    conn.execute(f"CREATE SCHEMA {SCHEMA}")
    conn.execute(f"CREATE TABLE {SCHEMA}.vectors (id integer PRIMARY KEY, embedding {storage}({dim}))")
    try:
        # 1. binary COPY (float32 rows; Postgres casts to half precision for halfvec)
        task = bar.add_task(f"{storage}: COPY vectors", total=len(base))
        t0 = time.perf_counter()
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY {SCHEMA}.vectors (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as cp,
        ):
            cp.set_types(["int4", storage])
            for i, v in enumerate(base):
                cp.write_row((i, HalfVector(v) if storage == "halfvec" else v))
                if i % 5000 == 0:
                    bar.update(task, completed=i)
        out["insert_rows_per_s"] = round(len(base) / (time.perf_counter() - t0))
        bar.update(task, completed=len(base))

        # 2. HNSW build
        task = bar.add_task(f"{storage}: HNSW build", total=1)
        conn.execute("SET maintenance_work_mem = '4GB'")  # the graph in memory: a spilled build is many times slower
        t0 = time.perf_counter()
        conn.execute(
            f"CREATE INDEX bench_hnsw ON {SCHEMA}.vectors USING hnsw (embedding {STORAGES[storage]})"
            f" WITH (m = {sp.hnsw_m}, ef_construction = {sp.hnsw_ef_construction})"
        )
        out["hnsw_build_s"] = round(time.perf_counter() - t0, 1)
        bar.update(task, completed=1)
        conn.execute(f"ANALYZE {SCHEMA}.vectors")
        (out["index_mb"], out["table_mb"]) = conn.execute(
            f"SELECT pg_relation_size('{SCHEMA}.bench_hnsw') / 1048576.0, pg_table_size('{SCHEMA}.vectors') / 1048576.0"
        ).fetchone()
        out["index_mb"], out["table_mb"] = round(float(out["index_mb"]), 1), round(float(out["table_mb"]), 1)

        # 3. queries: HNSW at each ef_search, then the exact scan for reference
        sql = f"SELECT id FROM {SCHEMA}.vectors ORDER BY embedding <=> %s::{storage} LIMIT {k}"
        rows = []
        conn.execute("SET enable_seqscan = off")  # measure HNSW even where a small table would scan
        for ef in ef_values:
            conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            rows.append(
                {
                    "method": "hnsw",
                    "ef_search": ef,
                    **_time_queries(conn, sql, qvecs, truth, bar, f"{storage}: ef_search={ef}"),
                }
            )
        conn.execute("RESET enable_seqscan")
        conn.execute("SET enable_indexscan = off")
        n_exact = min(len(qvecs), 50)
        rows.append(
            {
                "method": "exact scan",
                "ef_search": None,
                **_time_queries(conn, sql, qvecs[:n_exact], truth[:n_exact], bar, f"{storage}: exact scan"),
            }
        )
        conn.execute("RESET enable_indexscan")
        out["search"] = rows
    finally:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    return out


def _time_queries(conn, sql: str, qvecs: np.ndarray, truth: np.ndarray, bar, label: str) -> dict:
    # Not server-side prepared: a cached plan would outlive `SET enable_indexscan = off`.
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, (qvecs[0],), prepare=False).fetchone()[0]
    for q in qvecs[:5]:  # warm the cache
        conn.execute(sql, (q,), prepare=False).fetchall()
    task = bar.add_task(label, total=len(qvecs))
    times, found = [], []
    for q in qvecs:
        t0 = time.perf_counter()
        ids = [i for (i,) in conn.execute(sql, (q,), prepare=False).fetchall()]
        times.append(time.perf_counter() - t0)
        found.append(ids)
        bar.advance(task)
    return {
        "p50_ms": percentile_ms(times, 50),
        "p95_ms": percentile_ms(times, 95),
        "recall_at_k": round(recall_vs_exact(found, truth), 4),
        "scan": _scan_node(plan[0]["Plan"]),
    }


def _scan_node(node: dict) -> str:
    """The plan's leaf scan, e.g. 'Index Scan' (HNSW) or 'Seq Scan' (exact), so a row says what it measured."""
    while node.get("Plans"):
        node = node["Plans"][0]
    return node["Node Type"]


def bench_staging(passages: list[str], n_queries: int, k: int) -> dict:
    """Write + parse one staging file of k real candidates per query."""
    now = datetime.now(UTC)
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for qi in range(n_queries):
            cands = [
                Candidate(
                    r + 1,
                    qi * k + r,
                    f"/corpus/doc-{qi}-{r}.md",
                    "Heading",
                    "Parent",
                    1,
                    12,
                    passages[(qi * k + r) % len(passages)],
                    "ab" * 32,
                    0.9 - r * 0.01,
                    300,
                    r + 1,
                    None,
                )
                for r in range(k)
            ]
            sf = staging.from_result(SearchResult(f"query {qi}", cands, 0.0), query_id=f"q{qi}", now=now)
            t0 = time.perf_counter()
            back = staging.read(staging.write(sf, Path(tmp)))
            times.append(time.perf_counter() - t0)
            assert back == sf
    return {
        "write_parse_p50_ms": percentile_ms(times, 50),
        "write_parse_p95_ms": percentile_ms(times, 95),
        "candidates": k,
    }


def print_table(result: dict, console) -> None:
    t = Table(
        title=f"pgvector top-{result['k']} over {result['vectors']:,} x {result['dim']} "
        f"({result['real_vectors']:,} real MiniLM + {result['mixture_vectors']:,} mixtures), "
        f"{result['queries']} SciFact queries, on {result.get('machine', 'this machine')}"
    )
    for col in ("storage", "method", "ef_search", "plan", "p50 ms", "p95 ms", f"recall@{result['k']}"):
        t.add_column(col, justify="right")
    for st in result["storages"]:
        for r in st["search"]:
            t.add_row(
                st["storage"],
                r["method"],
                str(r["ef_search"] or "-"),
                r["scan"],
                f"{r['p50_ms']:.2f}",
                f"{r['p95_ms']:.2f}",
                f"{r['recall_at_k']:.4f}",
            )
    console.print(t)
    for st in result["storages"]:
        console.print(
            f"{st['storage']}: insert (binary COPY) {st['insert_rows_per_s']:,} rows/s | HNSW build "
            f"(m={result['hnsw']['m']}, ef_construction={result['hnsw']['ef_construction']}) {st['hnsw_build_s']} s | "
            f"index {st['index_mb']:,.1f} MB, table {st['table_mb']:,.1f} MB"
        )
    s = result["staging"]
    console.print(
        f"staging write+parse ({s['candidates']} candidates): p50 {s['write_parse_p50_ms']} ms, "
        f"p95 {s['write_parse_p95_ms']} ms"
    )
    console.print(
        f"targets: p50 <= {result['targets']['p50_ms']} ms, p95 <= {result['targets']['p95_ms']} ms, "
        f"recall@k >= {result['targets']['recall_at_k']}, staging <= {result['targets']['staging_ms']} ms"
    )
