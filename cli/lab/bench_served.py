"""`pai lab bench served-recall`: SciFact claims through the service's query path (`serving.service.run_query`, the
selector's pick, the context cut to k, exploration off; the log a scratch one), scored over every claim of the split
(eval/bench/served_recall.py); `--against` an earlier run's `--out` gives the paired difference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

from eval.bench import served_recall
from eval.retrieval_eval import load_scifact
from eval.scifact_bench import BenchmarkParams
from retrieval.contracts.selection import DEFAULT_K
from retrieval.db import DatabaseError
from retrieval.logs.scratch import scratch_log
from retrieval.params import load_section
from serving.selectors import resolve
from serving.server import build_service
from serving.service import in_process, run_query

from ..terminal import BENCH_SERVICE, BenchDirOpt, JsonOpt, OutOpt, ParamsOpt, _fail, emit, judged_dir, machine

app = typer.Typer()


@app.command(
    "served-recall", rich_help_panel=BENCH_SERVICE, short_help="SciFact claims served end to end: Recall@k over all."
)
def served_recall_command(
    selector: Annotated[
        str,
        typer.Option(
            help="first-stage (the first stage's order, no selector) or a selector folder, as `pai serve --selector`"
        ),
    ] = "first-stage",
    split: Annotated[
        Optional[str],
        typer.Option(help="the SciFact split whose claims are asked; default: params.yaml benchmark.split"),
    ] = None,
    k: Annotated[
        Optional[int], typer.Option(min=1, help="the context's chunks (/query's k); default: the selector's")
    ] = None,
    against: Annotated[
        Optional[Path], typer.Option(help="an earlier run's --out: the paired difference, this run minus that one")
    ] = None,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Each claim of the split through the service (this store, these params), scored by the share of its relevant
    abstracts in the served context: one figure over every claim, comparable across first stages."""
    k = k or DEFAULT_K
    try:
        split = split or load_section(params, "benchmark", BenchmarkParams).split
        earlier = json.loads(against.read_text())["claims"] if against else None
        if earlier is not None and not isinstance(earlier, dict):
            raise ValueError(f"{against}: not a served-recall result")
        queries = load_scifact(judged_dir(params, benchmark_dir), split)
        if not queries:
            raise ValueError(f"no SciFact {split} claims with qrels")
        chosen = resolve(selector)
        claims = {}
        with scratch_log() as url:
            service = build_service(params, chosen, inline=True, db_url=url)
            service.picker.explore_rate = 0.0
            with in_process(service):
                for qid, text, relevant in queries:
                    body = run_query(service, text, inline=True, k=k)
                    claims[qid] = served_recall.claim_recall([c["source"] for c in body["context"]], relevant, k)
    except (OSError, ValueError, KeyError, TypeError, DatabaseError) as e:
        _fail(str(e) if not isinstance(e, KeyError) else f"not a served-recall result: no {e}")
    mean = round(float(np.mean(list(claims.values()))), 4)
    result = {"machine": machine(), "selector": selector, "split": split, "k": k, "recall": mean, "claims": claims}
    line = f"served-recall: {len(claims)} {split} claims, Recall@{k} {mean:.4f} ({selector}) — {result['machine']}"
    if earlier is not None:
        result["against"] = c = served_recall.compare(earlier, claims)
        d, lo, hi = c["new_minus_old"]
        line += f"\nagainst {against}: {c['old']:.4f} -> {c['new']:.4f}, {d:+.4f} [{lo:+.4f}, {hi:+.4f}] on {c['claims']} claims"
    emit(result, as_json, out, line)
