"""The `pai` commands that drive the pipeline and measure: cycle and eval; `lab simulate` and `lab loop
report`; `bench retrieval`, `serve`, `policy` and `swap`. Registered by cli/main.py, cli/lab.py and
cli/bench.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from eval import promotion
from eval.bench import hnsw
from eval.evaluate import EvaluateParams, evaluate, load_champion
from eval.evaluate import print_table as print_eval_table
from eval.retrieval_eval import load_scifact
from retrieval.db import DatabaseError
from retrieval.embed import get_embedder
from retrieval.params import BENCHMARK_DIR, EmbedParams, ParamsError, SearchParams, UsedParams, load_section
from serving.interface import SelectorLoadError
from serving.selectors import resolve
from training.build import BuildParams

from . import bench_policy, bench_serve, bench_swap, onpolicy
from .cycle import demo_database, demo_home, print_cycle, run_cycle
from .loop import print_loop, run_loop, write_outputs
from .replay import run_replay
from .terminal import BenchDirOpt, OutOpt, ParamsOpt, _fail, console, emit, machine, progress_bar


def simulate(
    dataset: Annotated[str, typer.Option(help="scifact or hotpotqa (under --benchmark-dir)")] = "scifact",
    split: Annotated[str, typer.Option(help="which queries to replay")] = "train",
    url: Annotated[Optional[str], typer.Option(help="a running service; default: start one in-process")] = None,
    max_queries: Annotated[Optional[int], typer.Option(help="replay only the first N queries")] = None,
    offset: Annotated[int, typer.Option(help="skip the first N queries of the split")] = 0,
    corpus_limit: Annotated[Optional[int], typer.Option(help="ingest only the relevant documents + N others")] = None,
    ingest: Annotated[
        bool, typer.Option(help="ingest the corpus first (--no-ingest: the store holds it, e.g. as `pai lab notes`)")
    ] = True,
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Replay benchmark queries through /query and post qrels-based feedback: a realistic feedback log."""
    try:
        with progress_bar() as bar:
            summary = run_replay(
                params,
                benchmark_dir,
                dataset,
                split,
                bar,
                url=url,
                limit=max_queries,
                corpus_limit=corpus_limit,
                ingest=ingest,
                offset=offset,
            )
    except (ParamsError, DatabaseError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    for err in summary.errors[:5]:
        console.print(f"[yellow]failed:[/yellow] {err}")
    t = Table(title=f"replay {dataset} {split}", show_header=False)
    for k, v in summary.as_dict().items():
        t.add_row(k, str(v))
    emit(summary.as_dict(), as_json, None, t)


def bench_retrieval_command(
    vectors: Annotated[int, typer.Option(help="table size (real MiniLM embeddings, topped up by mixtures)")] = 100_000,
    queries: Annotated[int, typer.Option(help="number of timed queries (real SciFact claims)")] = 200,
    ef_search: Annotated[
        Optional[list[int]], typer.Option("--ef-search", help="ef_search values to compare (default: params)")
    ] = None,
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    storage: Annotated[
        str, typer.Option(help="comma-separated column types, built side by side: vector (float32), halfvec (float16)")
    ] = "vector,halfvec",
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
    out: OutOpt = None,
) -> None:
    """pgvector HNSW per storage type: insert rate, build time, index size, p50/p95 latency, recall@k vs exact."""
    try:
        sp = load_section(params, "search", SearchParams)
        ep = load_section(params, "embed", EmbedParams)
        storages = tuple(x.strip() for x in storage.split(",") if x.strip())
        result = hnsw.run(vectors, queries, ef_search or [sp.ef_search], sp, ep, benchmark_dir, progress_bar, storages)
    except (ParamsError, DatabaseError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, lambda c: hnsw.print_table(result, c))


def cycle(
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    split: Annotated[str, typer.Option(help="SciFact qrels split to evaluate")] = "test",
    replay: Annotated[
        Optional[bool],
        typer.Option("--replay/--no-replay", help="replay SciFact train first (default: only into an empty log)"),
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """The main job on embedded defaults, one retrain cycle: ingest the SciFact corpus, replay its
    train queries into the feedback log when the log is empty, `dvc repro`, and measure retrieval on
    the test queries (vector vs hybrid)."""
    if home := demo_home():
        console.print(f"pai lab cycle: the demo runs in {home} (PAI_HOME unset), not in your memory", soft_wrap=True)
    try:
        if db := demo_database():
            console.print(f"pai lab cycle: the demo uses database {db} on DATABASE_URL's server, not yours")
        with progress_bar() as bar:
            result = run_cycle(params, benchmark_dir, split, bar, replay=replay)
    except (ParamsError, DatabaseError, FileNotFoundError, RuntimeError) as e:
        _fail(str(e))
    emit(result, as_json, None, lambda c: print_cycle(result, c))


def eval_command(
    benchmark: Annotated[Path, typer.Option(help="a benchmark file in the contract-5 format")],
    selector: Annotated[
        str,
        typer.Option(
            help="all, similarity, bm25, hybrid, selector (--model), champion, a registry version (7, pai-selector:7), "
            "or a model path (models/ranker, models/export, a .gguf)"
        ),
    ] = "all",
    model: Annotated[
        Optional[Path],
        typer.Option(
            help="the 'selector' system: an export folder (run as served) or models/selector (transformers); "
            "default: params.yaml evaluate.model"
        ),
    ] = None,
    max_queries: Annotated[int, typer.Option(help="evaluate the first N queries (0 = all)")] = 100,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as one JSON object")] = False,
) -> None:
    """Evaluate selectors on a benchmark file: one table, all systems side by side."""

    if not benchmark.exists():
        _fail(f"{benchmark}: no such benchmark file")
    try:
        p = replace(
            load_section(params, "evaluate", EvaluateParams),
            benchmarks=str(benchmark),
            feedback="",
            max_queries=max_queries,
        )
        model = Path(p.model) if model is None else model
        systems = ("all", "similarity", "bm25", "hybrid", "selector", "champion")
        if selector not in systems:  # a path (a model folder, an export, a .gguf) or a registry version, as served
            sel = resolve(selector if Path(selector).exists() else promotion.record_of(selector))
            selector = "selector"
        elif selector in ("all", "selector") and (
            (model / "selector.json").exists() or (model / "train_config.json").exists()
        ):
            sel = resolve(model)
        else:
            sel = None
        if selector == "selector" and sel is None:
            _fail(f"{model}: no exported or trained selector (run dvc repro)")
        champ = load_champion({}, console) if selector in ("all", "champion") else None
        if selector == "champion" and champ is None:
            _fail("no champion in the registry (pai promote VERSION)")
        with progress_bar() as bar:
            result, _ = evaluate(
                p,
                get_embedder(),
                sel,
                lambda name, n: lambda t=bar.add_task(name, total=n): bar.advance(t),
                champ,
                val_fraction=load_section(params, "build", BuildParams).val_fraction,  # no feedback split read here
                used=load_section(params, "used", UsedParams),
            )
    except (ParamsError, json.JSONDecodeError, KeyError, ValueError, promotion.RegistryError, SelectorLoadError) as e:
        _fail(f"{benchmark}: {e}")
    if selector != "all":
        for r in result.values():
            r["systems"] = {k: v for k, v in r["systems"].items() if k == selector}
            r["paired_bootstrap"] = {k: v for k, v in r["paired_bootstrap"].items() if k.startswith(selector + "_vs_")}
    emit(result, as_json, None, lambda c: print_eval_table(result, c))


def bench_serve_command(
    clients: Annotated[
        Optional[list[int]], typer.Option("--clients", help="concurrent clients (repeat to compare)")
    ] = None,
    duration: Annotated[float, typer.Option(help="seconds of load per client count")] = 30.0,
    notes: Annotated[int, typer.Option(help="webhook notes for ingest-to-searchable latency")] = 50,
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """/query latency and throughput under concurrent clients; webhook ingest-to-searchable latency."""
    try:
        queries = [q for _, q, _ in load_scifact(benchmark_dir, "test")]
        result = bench_serve.run(params, queries, clients or [1, 4, 20], duration, notes)
    except (FileNotFoundError, RuntimeError) as e:
        _fail(str(e))
    emit(result, as_json, None, lambda c: bench_serve.print_table(result, c))


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
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    params: ParamsOpt = Path("params.yaml"),
    out: Annotated[Optional[Path], typer.Option(help="also write the result as JSON here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """A selector answering every new query inline vs the first-stage order: /query p50 side by side, who
    served each query, what was embedded on the query path; on the store and on a folder of notes."""
    if notes is not None and not notes.is_dir():
        _fail(f"--notes {notes}: not a folder")
    try:
        selector = selector or load_section(params, "evaluate", EvaluateParams).ranker
        result = bench_policy.run(params, selector, benchmark_dir, notes, queries, log=console.print)
    except (FileNotFoundError, RuntimeError, DatabaseError, ParamsError) as e:
        _fail(str(e))
    emit(result, as_json, out, lambda c: bench_policy.print_table(result, c))


def bench_swap_command(
    clients: Annotated[int, typer.Option(help="concurrent clients")] = 20,
    duration: Annotated[float, typer.Option(help="seconds of load")] = 30.0,
    swaps: Annotated[int, typer.Option(help="promote/rollback moves during the load")] = 10,
    versions: Annotated[
        Optional[list[str]],
        typer.Option(
            "--version", help="registry versions to swap between (default: the two newest; 'similarity' if only one)"
        ),
    ] = None,
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """Hot-swaps under load: failed requests, stale versions after a swap, announce -> serving latency."""
    try:
        if not versions:
            known = sorted(
                int(m.version) for m in promotion.client().search_model_versions(f"name='{promotion.MODEL}'")
            )
            versions = [str(v) for v in known[-2:]] if len(known) >= 2 else [*map(str, known), "similarity"]
        queries = [q for _, q, _ in load_scifact(benchmark_dir, "test")]
        r = bench_swap.run(params, queries, versions, clients, duration, swaps, log=lambda s: console.print(s))
    except (promotion.RegistryError, DatabaseError, ValueError, RuntimeError) as e:
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


def loop_report(
    slices: Annotated[int, typer.Option(help="chronological slices of the SciFact feedback (one retrain each)")] = 3,
    max_queries: Annotated[int, typer.Option(help="held-out queries per benchmark (0 = all)")] = 0,
    out_dir: Annotated[Path, typer.Option(help="folder for loop.json and loop_recall.csv")] = Path("metrics"),
    consumer: Annotated[
        Optional[str],
        typer.Option(
            help="on-policy: serve each slice of SciFact train with the current champion, this consumer posting "
            "feedback (realistic: cites within its context; oracle: judges all 20, the bound), retrain, promote"
        ),
    ] = None,
    explore_rate: Annotated[
        Optional[float], typer.Option(help="on-policy: search.explore_rate while serving (default: params.yaml's)")
    ] = None,
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """Retrain the learned ranker after each slice of the feedback; held-out Recall@5 with 95% CIs per cycle.
    With --consumer, the loop runs on-policy through the service (`cli/onpolicy.py`)."""
    if slices < 1:
        _fail("--slices must be >= 1")
    if consumer is not None:
        if consumer not in ("realistic", "oracle"):
            _fail(f"--consumer {consumer!r}: realistic or oracle")
        if explore_rate is not None and not 0 <= explore_rate < 1:
            _fail("--explore-rate must be in [0, 1)")
        try:
            result = onpolicy.run_on_policy(
                params, benchmark_dir, consumer, slices, explore_rate, max_queries, log=console.print
            )
        except (ParamsError, FileNotFoundError, ValueError, DatabaseError) as e:
            _fail(str(e))
        tag = f"{consumer}{'' if explore_rate is None else f'-explore{explore_rate:g}'}"
        onpolicy.write_on_policy(result, out_dir / f"loop_onpolicy_{tag}.json")
        emit(result, as_json, None, lambda c: onpolicy.print_on_policy(result, c))
        return
    try:
        result = run_loop(params, slices, max_queries, log=lambda s: console.print(s, soft_wrap=True))
    except (ParamsError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    write_outputs(result, out_dir)
    emit(result, as_json, None, lambda c: print_loop(result, c))
