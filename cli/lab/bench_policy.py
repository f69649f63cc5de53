"""`pai lab bench policy`: what a user's new query costs with the champion answering inline.

Two `pai serve` processes run side by side on one store: one pinned to the first-stage order
(`--selector first-stage`), one to a selector (default: the learned ranker, `models/ranker`). One client
sends each new query to both, in alternating order (so drift and warm caches cost both alike), and
compares /query latency, which selector chose each context, and what the selector embedded on the query
path (`/stats` `embedded_on_query_path`, which stays 0 when the stored vectors are used).

Stores: `scifact` is the current one (`pai lab cycle` ingests the SciFact corpus into it; SciFact test
claims are the queries); `--notes DIR` ingests a markdown folder into a scratch database on the same
server (dropped after) and asks each section's heading path (nested headings, the user's own notes).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Annotated, Optional

import httpx
import numpy as np
import psycopg
import typer
from rich.table import Table

from eval.evaluate import EvaluateParams
from eval.retrieval_eval import load_scifact
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import DatabaseError, connect, database_url, scratch_database
from retrieval.embed import get_embedder
from retrieval.logs.scratch import scratch_log
from retrieval.params import EmbedParams, IngestParams, ParamsError, SearchParams, load_section
from serving.server import free_port

from ..terminal import BENCH_SERVICE, BenchDirOpt, ParamsOpt, _fail, console, emit, judged_dir, machine
from .bench_serve import start_service

app = typer.Typer()


def heading_queries(conn: psycopg.Connection, n: int, seed: int = 0) -> list[str]:
    """The store's distinct heading paths (`parent heading heading`) as short queries a user would ask."""
    rows = conn.execute(
        "SELECT DISTINCT concat_ws(' ', parent_heading, heading) FROM chunks WHERE heading IS NOT NULL"
    ).fetchall()
    queries = sorted(q for (q,) in rows if len(q.split()) >= 2)
    random.Random(seed).shuffle(queries)
    return queries[:n]


def nested_share(conn: psycopg.Connection) -> tuple[int, int]:
    (chunks, nested) = conn.execute("SELECT count(*), count(parent_heading) FROM chunks").fetchone()
    return chunks, nested


def compare(params: Path, selector: str, queries: list[str], env: dict[str, str]) -> dict:
    """Both services up, each query to both (alternating which goes first), then their figures."""
    procs, urls = {}, {}
    old = os.environ.copy()
    os.environ.update(env)
    try:
        with tempfile.TemporaryDirectory() as staging:
            for name, sel in (("first_stage", "first-stage"), ("selector", selector)):
                port = free_port()
                procs[name] = start_service(params, port, Path(staging) / name, ["--selector", sel])
                urls[name] = f"http://127.0.0.1:{port}"
            lat: dict[str, list[float]] = {"first_stage": [], "selector": []}
            versions: dict[str, dict[str, int]] = {"first_stage": {}, "selector": {}}
            with httpx.Client(timeout=60) as c:
                for name in urls:  # warm-up: first-call allocations, the embedder's first batch
                    c.post(f"{urls[name]}/query", json={"query": "warm up the service"}).raise_for_status()
                before = {name: c.get(f"{urls[name]}/stats").json() for name in urls}
                for i, q in enumerate(queries):
                    for name in ("first_stage", "selector") if i % 2 == 0 else ("selector", "first_stage"):
                        t0 = time.perf_counter()
                        r = c.post(f"{urls[name]}/query", json={"query": q})
                        lat[name].append(time.perf_counter() - t0)
                        r.raise_for_status()
                        v = r.json()["selector_version"]
                        versions[name][v] = versions[name].get(v, 0) + 1
                after = {name: c.get(f"{urls[name]}/stats").json() for name in urls}
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=30)
        os.environ.clear()
        os.environ.update(old)
    out = {}
    for name in urls:
        ms = np.array(lat[name]) * 1000
        emb_b, emb_a = before[name]["embedded_on_query_path"], after[name]["embedded_on_query_path"]
        out[name] = {
            "queries": len(ms),
            "p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1),
            "served_by": versions[name],
            "embedded_on_query_path": {k: emb_a[k] - emb_b[k] for k in emb_a},
            "topped_up": after[name]["selector"].get("topped_up", 0) - before[name]["selector"].get("topped_up", 0),
        }
    out["p50_ratio"] = round(out["selector"]["p50_ms"] / out["first_stage"]["p50_ms"], 3)
    return out


def run(params: Path, selector: str, benchmark_dir: Path, notes: Path | None, queries: int, log=print) -> dict:
    base = database_url()
    result: dict = {"machine": machine(), "selector": selector, "stores": {}}
    with connect(base) as conn:
        chunks, nested = nested_share(conn)
    if chunks:
        claims = [q for _, q, _ in load_scifact(benchmark_dir, "test")][:queries]
        log(f"scifact: {chunks:,} chunks, {len(claims)} claims to each service")
        with scratch_log(base) as lab:  # the feedback log that trains the selector holds no bench traffic
            r = compare(params, selector, claims, {"DATABASE_URL": lab})
        result["stores"]["scifact"] = {"chunks": chunks, "nested_heading_chunks": nested, **r}
    if notes is not None:
        with scratch_database("pai_bench_notes") as url:
            with connect(url) as conn:
                ip, sp = load_section(params, "ingest", IngestParams), load_section(params, "search", SearchParams)
                embedder = get_embedder(load_section(params, "embed", EmbedParams))
                t0 = time.perf_counter()
                rep = ingest_paths(conn, [notes], ip, sp, embedder)
                log(f"notes: {notes} ingested, {rep.chunks_inserted:,} chunks in {time.perf_counter() - t0:.0f} s")
                chunks, nested = nested_share(conn)
                asks = heading_queries(conn, queries)
            log(f"notes: {chunks:,} chunks ({nested:,} under a nested heading), {len(asks)} heading paths asked")
            r = compare(params, selector, asks, {"DATABASE_URL": url})
            result["stores"][f"notes:{notes.name}"] = {"chunks": chunks, "nested_heading_chunks": nested, **r}
    if not result["stores"]:
        raise RuntimeError("the store is empty and no --notes folder was given (run pai lab cycle, or pass --notes)")
    return result


def print_table(result: dict, console) -> None:
    t = Table(title=f"/query, new queries, one client: {result['selector']} vs the first-stage order")
    for col in (
        "store",
        "chunks",
        "nested",
        "system",
        "queries",
        "p50 ms",
        "p95 ms",
        "served by",
        "embedded",
        "topped up",
    ):
        t.add_column(col, justify="right")
    for store, r in result["stores"].items():
        for name in ("first_stage", "selector"):
            s = r[name]
            t.add_row(
                store,
                f"{r['chunks']:,}",
                f"{r['nested_heading_chunks']:,}",
                name,
                str(s["queries"]),
                str(s["p50_ms"]),
                str(s["p95_ms"]),
                ", ".join(f"{v} {n}" for v, n in s["served_by"].items()),
                ", ".join(f"{k} {v}" for k, v in s["embedded_on_query_path"].items()),
                str(s["topped_up"]),
            )
    console.print(t)
    for store, r in result["stores"].items():
        console.print(f"{store}: p50 ratio selector / first stage = {r['p50_ratio']} (target <= 1.3)")
    console.print(f"machine: {result['machine']}")


@app.command(
    "policy", rich_help_panel=BENCH_SERVICE, short_help="A selector inline vs the first-stage order: /query p50."
)
def bench_policy_command(
    selector: Annotated[
        Optional[str],
        typer.Option(
            help="the selector to compare with the first-stage order (a folder, as `pai serve --selector`); "
            "default: params.yaml evaluate.ranker"
        ),
    ] = None,
    notes: Annotated[
        Optional[Path], typer.Option(help="a markdown folder: ingested into a scratch database, its headings asked")
    ] = None,
    queries: Annotated[int, typer.Option(min=1, help="new queries per store, each sent to both services")] = 200,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    out: Annotated[Optional[Path], typer.Option(help="also write the result as JSON here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """A selector answering every new query inline vs the first-stage order: /query p50 side by side, who
    served each query, what was embedded on the query path; on the store and on a folder of notes."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    if notes is not None and not notes.is_dir():
        _fail(f"--notes {notes}: not a folder")
    try:
        selector = selector or load_section(params, "evaluate", EvaluateParams).ranker
        result = run(params, selector, benchmark_dir, notes, queries, log=console.print)
    except (FileNotFoundError, RuntimeError, DatabaseError, ParamsError) as e:
        _fail(str(e))
    emit(result, as_json, out, lambda c: print_table(result, c))
