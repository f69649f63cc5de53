"""`pai lab bench swap`: hot-swaps under load, measured from outside the service.

Starts `pai serve --inline` (following the champion) as its own process, sends real SciFact claims
from N client threads for D seconds, and meanwhile moves the champion S times (promote, then
alternately rollback and promote between registered versions). Reports failed requests, whether
every request that started after a swap returned was served by the new version, and the
announce -> serving latency of each swap (from the service's apply rows). Afterwards its queries
are deleted from the feedback log and the champion is moved back to what it was.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import httpx
import numpy as np
import typer
from rich.table import Table

from eval import promotion, registry
from eval.retrieval_eval import load_scifact
from retrieval.db import DatabaseError
from retrieval.logs.scratch import scratch_log
from serving.selectors import FIRST_STAGE_RECORD
from serving.server import free_port

from ..terminal import BENCH_SERVICE, BenchDirOpt, ParamsOpt, _fail, console, emit, judged_dir
from .bench_serve import start_service

app = typer.Typer()


@dataclass
class Req:
    start: float
    end: float
    ok: bool
    version: str | None  # selector_version of the response
    error: str | None = None


def plan(versions: list[str], swaps: int) -> list[tuple[str, str | None]]:
    """(action, version) moves: promote a, promote b, rollback (-> a), promote b, rollback, ..."""
    moves: list[tuple[str, str | None]] = [("promote", versions[0])]
    while len(moves) < swaps:
        moves.append(
            ("promote", versions[1]) if moves[-1][0] != "promote" or moves[-1][1] == versions[0] else ("rollback", None)
        )
    return moves[:swaps]


def run(
    params: Path, queries: list[str], versions: list[str], clients: int, seconds: float, swaps: int, log=print
) -> dict:
    if len(versions) < 2:
        raise ValueError("need two selector versions to swap between (registry versions or 'first-stage')")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    reqs: list[Req] = []
    lock = threading.Lock()
    before, history_before = registry.champion() or dict(FIRST_STAGE_RECORD), registry.history()
    # its queries in a scratch log: the feedback log that trains the selector holds no bench traffic
    with scratch_log() as lab, tempfile.TemporaryDirectory() as staging:
        proc = start_service(params, port, Path(staging), extra=["--inline"], db_url=lab)
        try:
            promotion.promote("first-stage", "bench swap: start from the first-stage order", wait_s=60)
            stop = time.monotonic() + seconds

            def client(i: int) -> None:
                rng = random.Random(i)
                with httpx.Client(base_url=url, timeout=60) as c:
                    while time.monotonic() < stop:
                        t0 = time.time()
                        try:
                            r = c.post("/query", json={"query": rng.choice(queries), "inline": True})
                            req = Req(
                                t0,
                                time.time(),
                                r.status_code == 200,
                                r.json().get("selector_version") if r.status_code == 200 else None,
                                None if r.status_code == 200 else r.text[:200],
                            )
                        except httpx.HTTPError as e:
                            req = Req(t0, time.time(), False, None, str(e)[:200])
                        with lock:
                            reqs.append(req)

            threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
            for t in threads:
                t.start()
            moves = []
            gap = seconds / (swaps + 1)
            for action, version in plan(versions, swaps):
                time.sleep(gap)
                t0 = time.time()
                moved = (
                    promotion.promote(version, "bench swap", wait_s=60)
                    if action == "promote"
                    else promotion.rollback(wait_s=60)
                )
                moves.append(
                    {
                        "action": action,
                        "version": moved.version,
                        "started": t0,
                        "returned": time.time(),
                        "swap_ms": moved.swap_ms[0] if moved.swap_ms else None,
                        "command_s": round(time.time() - t0, 3),
                    }
                )
                log(f"  {action} -> {moved.version}: announce -> serving {moves[-1]['swap_ms']} ms")
            for t in threads:
                t.join()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            # leave no trace: the champion as it was
            promotion.move_champion(
                before, "revert", "bench swap: restore the champion", wait_s=0, previous=history_before
            )
    # every request that started after a swap returned (and before the next one was announced) must
    # carry its version; requests in between two moves may legitimately get either
    stale = 0
    checked = 0
    for i, m in enumerate(moves):
        until = moves[i + 1]["started"] if i + 1 < len(moves) else float("inf")
        for r in reqs:
            if r.ok and m["returned"] < r.start < until:
                checked += 1
                stale += r.version != m["version"]
    ms = np.array([(r.end - r.start) * 1000 for r in reqs if r.ok])
    swap = np.array([m["swap_ms"] for m in moves if m["swap_ms"] is not None])
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": len(reqs),
        "failed": sum(not r.ok for r in reqs),
        "errors": sorted({r.error for r in reqs if r.error})[:3],
        "swaps": len(moves),
        "requests_after_swaps": checked,
        "served_by_old_version_after_swap": stale,
        "swap_ms_p50": round(float(np.percentile(swap, 50)), 1) if len(swap) else None,
        "swap_ms_p95": round(float(np.percentile(swap, 95)), 1) if len(swap) else None,
        "query_p50_ms": round(float(np.percentile(ms, 50)), 1) if len(ms) else None,
        "query_p95_ms": round(float(np.percentile(ms, 95)), 1) if len(ms) else None,
        "moves": [{k: v for k, v in m.items() if k not in ("started", "returned")} for m in moves],
    }


@app.command(
    "swap", rich_help_panel=BENCH_SERVICE, short_help="Hot-swaps under load: failures, stale versions, latency."
)
def bench_swap_command(
    clients: Annotated[int, typer.Option(help="concurrent clients")] = 20,
    duration: Annotated[float, typer.Option(help="seconds of load")] = 30.0,
    swaps: Annotated[int, typer.Option(help="promote/rollback moves during the load")] = 10,
    versions: Annotated[
        Optional[list[str]],
        typer.Option(
            "--version", help="registry versions to swap between (default: the two newest; 'first-stage' if only one)"
        ),
    ] = None,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """Hot-swaps under load: failed requests, stale versions after a swap, announce -> serving latency."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        if not versions:
            known = sorted(int(m.version) for m in registry.client().search_model_versions(f"name='{registry.MODEL}'"))
            versions = [str(v) for v in known[-2:]] if len(known) >= 2 else [*map(str, known), "first-stage"]
        queries = [q for _, q, _ in load_scifact(benchmark_dir, "test")]
        r = run(params, queries, versions, clients, duration, swaps, log=lambda s: console.print(s))
    except (registry.RegistryError, DatabaseError, ValueError, RuntimeError) as e:
        _fail(str(e))
    t = Table(title=f"hot-swap under load: {clients} clients, {duration:g} s, {r['swaps']} swaps")
    columns = {  # header: the result's key
        "requests": "requests",
        "failed": "failed",
        "after swaps": "requests_after_swaps",
        "stale": "served_by_old_version_after_swap",
        "swap p50 ms": "swap_ms_p50",
        "swap p95 ms": "swap_ms_p95",
        "query p50 ms": "query_p50_ms",
        "query p95 ms": "query_p95_ms",
    }
    for col in columns:
        t.add_column(col, justify="right")
    t.add_row(*(str(r[key]) for key in columns.values()))
    emit(r, as_json, None, t)
