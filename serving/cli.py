"""`pai`: a thin command line over the stage functions. Each command: parse -> call core -> print."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from retrieval.db import DatabaseError
from retrieval.params import ParamsError, load_section

app = typer.Typer(add_completion=False, no_args_is_help=True, help="pai-brain: retrieval, selection and retraining.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (figures for the README and issue notes).")
app.add_typer(bench_app, name="bench")

console = Console(stderr=True)  # progress and tables on stderr; --json output alone on stdout
ParamsOpt = Annotated[Path, typer.Option("--params", help="params.yaml to read")]


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}", soft_wrap=True)  # one line, however narrow the terminal
    raise typer.Exit(2)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
    )  # fmt: skip


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files, directories or JSONL corpora")],
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Chunk, scrub, embed and store files; unchanged files write nothing, deleted ones are removed."""
    from retrieval.db import connect
    from retrieval.embed import get_embedder
    from retrieval.ingest import ingest_paths
    from retrieval.params import EmbedParams, IngestParams, SearchParams, load_section

    try:
        ip = load_section(params, "ingest", IngestParams)
        sp = load_section(params, "search", SearchParams)
        ep = load_section(params, "embed", EmbedParams)
        with connect() as conn, progress_bar() as bar:
            task = bar.add_task("ingest", total=None)
            embedder = get_embedder(ep.batch_size)
            report = ingest_paths(conn, paths, ip, sp, embedder, lambda done, total: bar.update(task, completed=done, total=total))
    except (ParamsError, DatabaseError) as e:
        _fail(str(e))
    for err in report.errors:
        console.print(f"[yellow]skipped:[/yellow] {err}", soft_wrap=True)
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
        return
    t = Table(title="ingest", show_header=False)
    for k, v in report.as_dict().items():
        if k != "errors":
            t.add_row(k, str(v))
    t.add_row("errors", str(len(report.errors)))
    console.print(t)


@app.command()
def query(
    texts: Annotated[list[str], typer.Argument(help="one or more queries (one staging file each)")],
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
    staging_dir: Annotated[Optional[Path], typer.Option(help="override staging.dir")] = None,
    no_staging: Annotated[bool, typer.Option("--no-staging", help="do not write staging files")] = False,
) -> None:
    """Search: top-k candidates, the budgeted context, and a staging file per query."""
    from dataclasses import asdict

    from retrieval import staging
    from retrieval.db import connect
    from retrieval.embed import get_embedder
    from retrieval.params import EmbedParams, SearchParams, StagingParams, load_section
    from retrieval.search import search

    texts = [t for t in texts if t.strip()]
    if not texts:
        _fail("empty query")
    try:
        sp = load_section(params, "search", SearchParams)
        st = load_section(params, "staging", StagingParams)
        ep = load_section(params, "embed", EmbedParams)
        embedder = get_embedder(ep.batch_size)
        with connect() as conn:
            results = [search(conn, embedder, t, sp) for t in texts]
    except (ParamsError, DatabaseError) as e:
        _fail(str(e))
    directory = staging_dir or Path(st.dir)
    out = []
    written = []
    for r in results:
        path = None
        if not no_staging:
            path = staging.write(staging.from_result(r), directory, display_root=os.getcwd())
            written.append(path)
        out.append({
            "query": r.query, "staging_file": str(path) if path else None,
            "below_threshold": r.below_threshold,
            "context": [c.chunk_id for c in r.context],
            "candidates": [asdict(c) for c in r.candidates],
        })  # fmt: skip
    if st.git and written:
        staging.commit_batch(directory, written, f"pai query: {len(written)} staging file(s)")
    if as_json:
        print(json.dumps(out if len(out) > 1 else out[0], indent=2, ensure_ascii=False))
        return
    for r, o in zip(results, out):
        t = Table(title=f"{r.query}  ({len(r.context)} in context, {r.below_threshold} below threshold)")
        for col in ("#", "score", "source", "lines", "ctx", "text"):
            t.add_column(col, overflow="fold")
        ctx = {c.chunk_id for c in r.context}
        for c in r.candidates:
            t.add_row(str(c.rank), f"{c.score:.3f}", c.source[-60:], f"{c.start_line}-{c.end_line}",
                      "✓" if c.chunk_id in ctx else "", c.text[:80].replace("\n", " "))  # fmt: skip
        console.print(t)
        if o["staging_file"]:
            console.print(f"staging file: {o['staging_file']}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="bind address (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8484,
    inline: Annotated[bool, typer.Option("--inline", help="wait for the selector (with a timeout) instead of selecting in the background")] = False,
    selector: Annotated[str, typer.Option(help="selector backend")] = "similarity",
    timeout: Annotated[float, typer.Option(help="selector timeout, seconds")] = 30.0,
    staging_dir: Annotated[Optional[Path], typer.Option(help="override staging.dir")] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Run the retrieval service (HTTP API; OpenAPI docs at /docs)."""
    import uvicorn

    from serving.app import create_app
    from serving.selectors import build_selector
    from serving.server import build_service

    try:
        service = build_service(params, build_selector(selector), inline=inline, staging_dir=staging_dir, timeout_s=timeout)
    except (ParamsError, DatabaseError, ValueError) as e:
        _fail(str(e))
    if host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"[yellow]warning:[/yellow] listening on {host}, beyond loopback")
    console.print(f"pai serve: http://{host}:{port}  (docs: /docs, selector: {service.picker.selector.version}, "
                  f"{'inline' if inline else 'background'} selection)")  # fmt: skip
    uvicorn.run(create_app(service), host=host, port=port, log_level="info")


@app.command()
def simulate(
    benchmark: Annotated[str, typer.Option(help="scifact or hotpotqa")] = "scifact",
    split: Annotated[str, typer.Option(help="which queries to replay")] = "train",
    url: Annotated[Optional[str], typer.Option(help="a running service; default: start one in-process")] = None,
    limit: Annotated[Optional[int], typer.Option(help="replay only the first N queries")] = None,
    corpus_limit: Annotated[Optional[int], typer.Option(help="ingest only the relevant documents + N others")] = None,
    benchmark_dir: Annotated[Path, typer.Option(help="the shared benchmark folder")] = Path("../shared/benchmark"),
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Replay benchmark queries through /query and post qrels-based feedback: a realistic feedback log."""
    from eval.replay import run_replay

    try:
        with progress_bar() as bar:
            summary = run_replay(params, benchmark_dir, benchmark, split, bar, url=url, limit=limit, corpus_limit=corpus_limit)
    except (ParamsError, DatabaseError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    for err in summary.errors[:5]:
        console.print(f"[yellow]failed:[/yellow] {err}")
    if as_json:
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        t = Table(title=f"replay {benchmark} {split}", show_header=False)
        for k, v in summary.as_dict().items():
            t.add_row(k, str(v))
        console.print(t)


hooks_app = typer.Typer(no_args_is_help=True, help="Git hooks that keep the index current.")
app.add_typer(hooks_app, name="hooks")


@app.command()
def watch(
    inbox: Annotated[Path, typer.Argument(help="folder to watch; files move to processed/ or failed/")],
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Ingest every file dropped into INBOX (Ctrl-C to stop)."""
    import threading

    from retrieval.db import connect
    from retrieval.embed import get_embedder
    from retrieval.params import EmbedParams, IngestParams, SearchParams, load_section
    from serving.live import process_inbox_file
    from serving.live import watch as watch_inbox

    if not inbox.is_dir():
        _fail(f"{inbox}: not a folder")
    try:
        ip = load_section(params, "ingest", IngestParams)
        sp = load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams).batch_size)
        conn = connect()
    except (ParamsError, DatabaseError) as e:
        _fail(str(e))

    def handle(path: Path) -> None:
        where, report, error = process_inbox_file(conn, path, inbox, ip, sp, embedder)
        if error:
            console.print(f"[red]failed:[/red] {path.name}: {error} -> {where}")
        else:
            console.print(f"ingested {path.name}: {report.chunks_inserted} chunks -> {where}")

    console.print(f"watching {inbox} (Ctrl-C to stop)")
    stop = threading.Event()
    try:
        watch_inbox(inbox, handle, stop)
    except KeyboardInterrupt:
        stop.set()
    finally:
        conn.close()


@hooks_app.command("install")
def hooks_install(
    repo: Annotated[Path, typer.Argument(help="git repository whose commits to ingest")] = Path("."),
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Add a post-commit hook that re-ingests the files each commit touches."""
    from retrieval.db import pai_home
    from serving.live import install_hook

    try:
        hook = install_hook(repo, params, pai_home())
    except ValueError as e:
        _fail(str(e))
    console.print(f"installed {hook}")


@bench_app.command("retrieval")
def bench_retrieval(
    vectors: Annotated[int, typer.Option(help="table size (real MiniLM embeddings, topped up by mixtures)")] = 100_000,
    queries: Annotated[int, typer.Option(help="number of timed queries (real SciFact claims)")] = 200,
    ef_search: Annotated[Optional[list[int]], typer.Option("--ef-search", help="ef_search values to compare (default: params)")] = None,
    benchmark_dir: Annotated[Path, typer.Option(help="the shared benchmark folder")] = Path("../shared/benchmark"),
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """pgvector HNSW: insert rate, build time, p50/p95 latency, recall@k vs exact; staging write+parse."""
    from eval.bench_retrieval import print_table, run
    from retrieval.params import EmbedParams, SearchParams, load_section

    try:
        sp = load_section(params, "search", SearchParams)
        ep = load_section(params, "embed", EmbedParams)
        result = run(vectors, queries, ef_search or [sp.ef_search], sp, ep, benchmark_dir, progress_bar)
    except (ParamsError, DatabaseError, FileNotFoundError) as e:
        _fail(str(e))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, console)


@app.command()
def cycle(
    benchmark_dir: Annotated[Path, typer.Option(help="the shared benchmark folder")] = Path("../shared/benchmark"),
    split: Annotated[str, typer.Option(help="SciFact qrels split to evaluate")] = "test",
    replay: Annotated[Optional[bool], typer.Option("--replay/--no-replay", help="replay SciFact train first (default: only into an empty log)")] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """The main job on embedded defaults, one retrain cycle: ingest the SciFact corpus, replay its
    train queries into the feedback log when the log is empty, `dvc repro`, and measure retrieval on
    the test queries (vector vs hybrid)."""
    from eval.cycle import print_cycle, run_cycle

    try:
        with progress_bar() as bar:
            result = run_cycle(params, benchmark_dir, split, bar, replay=replay)
    except (ParamsError, DatabaseError, FileNotFoundError, RuntimeError) as e:
        _fail(str(e))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print_cycle(result, console)


@app.command("eval")
def eval_command(
    benchmark: Annotated[Path, typer.Option(help="a benchmark file in the contract-5 format")],
    selector: Annotated[str, typer.Option(help="all, similarity, bm25, hybrid or selector")] = "all",
    model: Annotated[Path, typer.Option(help="trained selector folder for the 'selector' system")] = Path("models/selector"),
    max_queries: Annotated[int, typer.Option(help="evaluate the first N queries (0 = all)")] = 100,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as one JSON object")] = False,
) -> None:
    """Evaluate selectors on a benchmark file: one table, all systems side by side."""
    from dataclasses import replace

    from eval.evaluate import EvaluateParams, evaluate, print_table
    from retrieval.embed import get_embedder
    from serving.selectors import TransformersSelector

    if not benchmark.exists():
        _fail(f"{benchmark}: no such benchmark file")
    try:
        p = replace(load_section(params, "evaluate", EvaluateParams), benchmarks=str(benchmark), feedback="", max_queries=max_queries)
        sel = TransformersSelector(model) if selector in ("all", "selector") and (model / "train_config.json").exists() else None
        if selector == "selector" and sel is None:
            _fail(f"{model}: no trained selector (run dvc repro)")
        with progress_bar() as bar:
            result, _ = evaluate(p, get_embedder(), sel, lambda name, n: (lambda t=bar.add_task(name, total=n): bar.advance(t)))
    except (ParamsError, json.JSONDecodeError, KeyError) as e:
        _fail(f"{benchmark}: {e}")
    if selector != "all":
        for r in result.values():
            r["systems"] = {k: v for k, v in r["systems"].items() if k == selector}
            r["paired_bootstrap"] = {k: v for k, v in r["paired_bootstrap"].items() if k.startswith(selector + "_vs_")}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, console)


@bench_app.command("serve")
def bench_serve(
    clients: Annotated[Optional[list[int]], typer.Option("--clients", help="concurrent clients (repeat to compare)")] = None,
    duration: Annotated[float, typer.Option(help="seconds of load per client count")] = 30.0,
    notes: Annotated[int, typer.Option(help="webhook notes for ingest-to-searchable latency")] = 50,
    benchmark_dir: Annotated[Path, typer.Option(help="the shared benchmark folder")] = Path("../shared/benchmark"),
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """/query latency and throughput under concurrent clients; webhook ingest-to-searchable latency."""
    from eval.bench_serve import print_table, run
    from eval.retrieval_eval import load_scifact

    try:
        queries = [q for _, q, _ in load_scifact(benchmark_dir, "test")]
        result = run(params, queries, clients or [1, 4, 20], duration, notes)
    except (FileNotFoundError, RuntimeError) as e:
        _fail(str(e))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, console)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
