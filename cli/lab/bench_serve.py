"""`pai lab bench serve`: the service under concurrent load, measured from outside it.

Starts `pai serve` as its own process on loopback (so the load generator does not share its
interpreter), sends real SciFact claims from N client threads for D seconds through the full
/query path (embed, hybrid search, staging file, feedback log, background selector), then measures
webhook ingest-to-searchable latency: POST /ingest a new note, then /query for it until it is found.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import httpx
import numpy as np
import typer
from rich.table import Table

from eval.retrieval_eval import load_scifact
from retrieval.db import connect
from retrieval.logs.scratch import scratch_log
from serving.server import free_port

from ..terminal import BENCH_SERVICE, BenchDirOpt, ParamsOpt, _fail, emit, judged_dir

app = typer.Typer()

NOTE_PREFIX = "bench-note-"


def start_service(
    params: Path, port: int, staging_dir: Path, extra: list[str] = (), db_url: str | None = None
) -> subprocess.Popen:
    """`pai serve` on `port` (its database: `db_url`, e.g. a scratch log, else this process's), ready."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "serve",
            "--port",
            str(port),
            "--params",
            str(params),
            "--staging-dir",
            str(staging_dir),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | ({"DATABASE_URL": db_url} if db_url else {}),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pai serve exited: {proc.stderr.read()[-500:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("pai serve did not become healthy in 120 s")


def load(url: str, queries: list[str], clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(i: int) -> None:
        rng = random.Random(i)
        with httpx.Client(base_url=url, timeout=30) as c:
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                try:
                    r = c.post("/query", json={"query": rng.choice(queries)})
                    ok = r.status_code == 200
                except httpx.HTTPError as e:
                    ok, r = False, e
                dt = time.perf_counter() - t0
                with lock:
                    (latencies.append(dt) if ok else errors.append(str(r)[:200]))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ms = np.array(latencies) * 1000
    return {
        "clients": clients,
        "seconds": round(wall, 1),
        "requests": len(latencies),
        "errors": len(errors),
        "requests_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


def ingest_to_searchable(url: str, texts: list[str], notes: int, seed: int = 0) -> dict:
    """Each note is a distinct real sentence; one that dedup skips (already stored) is passed over."""
    rng = random.Random(seed)
    times, skipped = [], 0
    with httpx.Client(base_url=url, timeout=30) as c:
        for i, sentence in enumerate(rng.sample(texts, len(texts))):
            if len(times) == notes:
                break
            source = f"{NOTE_PREFIX}{seed}-{i}"
            text = f"# Field note {i}\n\n{sentence} (observed {rng.randint(10, 999)} times)"
            t0 = time.perf_counter()
            r = c.post("/ingest", json={"source": source, "text": text})
            r.raise_for_status()
            if r.json()["chunks_inserted"] != 1:
                skipped += 1
                continue
            while True:
                r = c.post("/query", json={"query": text}).json()
                if any(cand["source"] == f"webhook:{source}" for cand in r["candidates"][:1]):
                    break
                if time.perf_counter() - t0 > 10:
                    raise RuntimeError(f"note {source} not searchable after 10 s")
            times.append(time.perf_counter() - t0)
    if not times:
        raise RuntimeError("every note was skipped as a duplicate")
    ms = np.array(times) * 1000
    return {
        "notes": len(times),
        "skipped_as_duplicate": skipped,
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
    }


def run(params: Path, queries: list[str], clients: list[int], seconds: float, notes: int) -> dict:
    """Benchmark, then remove what it wrote (its notes, its staging files); its queries are logged in a scratch
    log (`retrieval.logs.scratch`), so the feedback log that trains the selector holds no benchmark traffic."""
    port = free_port()
    with scratch_log() as lab, tempfile.TemporaryDirectory() as staging_dir:
        proc = start_service(params, port, Path(staging_dir), db_url=lab)
        url = f"http://127.0.0.1:{port}"
        try:
            chunks = httpx.get(f"{url}/health").json()["chunks"]
            rows = [load(url, queries, n, seconds) for n in clients]
            ingest = ingest_to_searchable(url, queries, notes, seed=time.time_ns())
            stats = httpx.get(f"{url}/stats").json()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            with connect() as conn:
                conn.execute("DELETE FROM documents WHERE starts_with(source, %s)", (f"webhook:{NOTE_PREFIX}",))
    return {
        "chunks": chunks,
        "load": rows,
        "ingest_to_searchable": ingest,
        "selector": stats["selector"],
        "targets": {"query_p50_ms": 25, "ingest_to_searchable_p95_ms": 1000},
    }


def print_table(result: dict, console) -> None:
    t = Table(title=f"/query under load ({result['chunks']:,} chunks, first-stage order in the background)")
    for col in ("clients", "seconds", "requests", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms"):
        t.add_column(col, justify="right")
    for r in result["load"]:
        t.add_row(
            *(
                str(r[k])
                for k in ("clients", "seconds", "requests", "errors", "requests_per_s", "p50_ms", "p95_ms", "p99_ms")
            )
        )
    console.print(t)
    i = result["ingest_to_searchable"]
    console.print(
        f"webhook ingest-to-searchable over {i['notes']} notes: p50 {i['p50_ms']} ms, p95 {i['p95_ms']} ms "
        f"| targets: /query p50 <= 25 ms, ingest-to-searchable p95 <= 1000 ms"
    )


@app.command(
    "serve", rich_help_panel=BENCH_SERVICE, short_help="/query latency and throughput under concurrent clients."
)
def bench_serve_command(
    clients: Annotated[
        Optional[list[int]], typer.Option("--clients", help="concurrent clients (repeat to compare)")
    ] = None,
    duration: Annotated[float, typer.Option(help="seconds of load per client count")] = 30.0,
    notes: Annotated[int, typer.Option(help="webhook notes for ingest-to-searchable latency")] = 50,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """/query latency and throughput under concurrent clients; webhook ingest-to-searchable latency."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        queries = [q for _, q, _ in load_scifact(benchmark_dir, "test")]
        result = run(params, queries, clients or [1, 4, 20], duration, notes)
    except (FileNotFoundError, RuntimeError) as e:
        _fail(str(e))
    emit(result, as_json, None, lambda c: print_table(result, c))
