"""`pai lab bench retrieval`, `general`, `usage`: the first stage and its order: pgvector's HNSW per storage type, the
ranker's general weights (cosine + w x BM25; with --domains, day one in every domain), and the usage prior. Thin
commands over their cores in eval/bench/ (hnsw.py, general_fusion.py, day_one.py, usage_prior.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from eval.bench import day_one, general_fusion, hnsw, usage_prior
from eval.items import bench_name, checked_items
from eval.scifact_bench import BenchmarkParams
from retrieval.db import DatabaseError, connect
from retrieval.embed import get_embedder
from retrieval.fusion import GeneralRule
from retrieval.params import EmbedParams, MaintainParams, ParamsError, SearchParams, load_section
from training.train_ranker import RankerParams

from ..terminal import (
    BENCH_INGEST,
    BENCH_RANKING,
    BenchDirOpt,
    JsonOpt,
    OutOpt,
    ParamsOpt,
    _fail,
    emit,
    judged_dir,
    machine,
    progress_bar,
)

app = typer.Typer()


@app.command(
    "retrieval", rich_help_panel=BENCH_INGEST, short_help="pgvector HNSW per storage type: size, latency, recall."
)
def bench_retrieval_command(
    vectors: Annotated[int, typer.Option(help="table size (real MiniLM embeddings, topped up by mixtures)")] = 100_000,
    queries: Annotated[int, typer.Option(help="number of timed queries (real SciFact claims)")] = 200,
    ef_search: Annotated[
        Optional[list[int]], typer.Option("--ef-search", help="ef_search values to compare (default: params)")
    ] = None,
    benchmark_dir: BenchDirOpt = None,
    storage: Annotated[
        str, typer.Option(help="comma-separated column types, built side by side: vector (float32), halfvec (float16)")
    ] = "vector,halfvec",
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
    out: OutOpt = None,
) -> None:
    """pgvector HNSW per storage type: insert rate, build time, index size, p50/p95 latency, recall@k vs exact."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        sp = load_section(params, "search", SearchParams)
        ep = load_section(params, "embed", EmbedParams)
        storages = tuple(x.strip() for x in storage.split(",") if x.strip())
        result = hnsw.run(vectors, queries, ef_search or [sp.ef_search], sp, ep, benchmark_dir, progress_bar, storages)
    except (ParamsError, DatabaseError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, lambda c: hnsw.print_table(result, c))


@app.command("general", rich_help_panel=BENCH_RANKING, short_help="The ranker's general weights: cosine + w x BM25.")
def bench_general_command(
    benchmark: Annotated[
        Optional[list[Path]],
        typer.Option("--benchmark", help="a contract-5 JSONL file; repeat (default: HotpotQA dev)"),
    ] = None,
    weights: Annotated[str, typer.Option(help="comma-separated BM25 weights w (cosine's is 1)")] = "0,0.25,0.5,0.75,1",
    sd_floor: Annotated[
        str, typer.Option(help="comma-separated floors of BM25's sd (train_ranker.bm25_sd_floor); 0 = plain")
    ] = "0",
    plain_floor: Annotated[
        str,
        typer.Option(help="comma-separated sd floors for queries in plain words (train_ranker.general_plain_floor)"),
    ] = "",
    name_ramp: Annotated[
        Optional[float],
        typer.Option(help="name share at which a query keeps --sd-floor (default: params.yaml train_ranker.name_ramp)"),
    ] = None,
    echo_query: Annotated[
        bool, typer.Option("--echo-query", help="prefix every candidate with the query (BM25 without evidence)")
    ] = False,
    max_queries: Annotated[int, typer.Option(help="queries per file; 0 = all")] = 0,
    domains_: Annotated[
        Optional[str],
        typer.Option(
            "--domains",
            help="day one: a folder of contract-5 files (`pai lab bench build-domains`) or comma-separated files; per "
            "domain cosine, BM25, hybrid, the first stage and the general order, fitted leave-one-domain-out",
        ),
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The ranker's general weights (train_ranker.general_bm25): cosine + w x BM25 beside the baselines; with
    --domains, day one: the first stage and the general order against plain vector search in every domain."""
    if domains_ is not None:
        return _day_one(domains_, max_queries, params, as_json, out)
    try:
        ws = [float(w) for w in weights.split(",")]
        floors = tuple(float(f) for f in sd_floor.split(","))
        plains = tuple(float(f) for f in plain_floor.split(",") if f.strip())
        if any(not w >= 0 for w in ws) or any(not 0 <= f < float("inf") for f in (*floors, *plains)):
            raise ValueError("--weights, --sd-floor and --plain-floor: each must be a number >= 0")
        name_ramp = load_section(params, "train_ranker", RankerParams).name_ramp if name_ramp is None else name_ramp
        if not 0 <= name_ramp <= 1:
            raise ValueError("--name-ramp: a share in [0, 1]")
        files = benchmark or [judged_dir(params, None) / "hotpotqa" / "dev.jsonl"]
        benchmarks = {bench_name(str(f)): checked_items(f, max_queries) for f in files}
        if echo_query:
            benchmarks = {f"{name} (query echoed)": general_fusion.echo_query(v) for name, v in benchmarks.items()}
        with progress_bar() as bar:
            result = general_fusion.run(benchmarks, ws, get_embedder(), bar, floors, plains, name_ramp)
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit({"machine": machine(), **result}, as_json, out, general_fusion.table(result, machine()))


def _day_one(spec: str, max_queries: int, params: Path, as_json: bool, out: Path | None) -> None:
    try:
        folder = Path(spec)
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else [Path(f) for f in spec.split(",") if f.strip()]
        if not files:
            raise ValueError(f"--domains {spec}: no contract-5 files there (`pai lab bench build-domains` writes them)")
        sets = {f.stem: checked_items(f, max_queries) for f in files}
        rule = GeneralRule.of(load_section(params, "search", SearchParams))
        with progress_bar() as bar:
            result = day_one.run(sets, get_embedder(), rule, bar)
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit({"machine": machine(), **result}, as_json, out, day_one.table(result, machine()))


@app.command(
    "usage", rich_help_panel=BENCH_RANKING, short_help="Does the usage prior help? Recall with and without it."
)
def bench_usage_command(
    bounds: Annotated[str, typer.Option(help="comma-separated usage_bound values to measure")] = "0.05,0.1,0.2",
    benchmark_dir: BenchDirOpt = None,
    split: Annotated[
        Optional[str], typer.Option(help="the held-out SciFact qrels split (default: params.yaml benchmark.split)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="also write the result (JSON) to this file")] = None,
) -> None:
    """Does the usage prior help? On a store holding SciFact and its train replay (`pai lab simulate`):
    held-out Recall@5 and first-stage recall with and without it, and the rank of fresh copies of
    the held-out queries' documents. Writes nothing (one rolled-back transaction)."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        split = load_section(params, "benchmark", BenchmarkParams).split if split is None else split
        mp = load_section(params, "maintain", MaintainParams)
        sp = load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
        with connect() as conn, progress_bar() as bar:
            result = usage_prior.run(
                conn, embedder, benchmark_dir, split, sp, mp, [float(b) for b in bounds.split(",")], bar
            )
    except (ParamsError, DatabaseError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    emit(result, as_json, out, usage_prior.table(result))
