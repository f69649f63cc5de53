"""`pai`: a thin command line over the stage functions. Each command: parse -> call core -> print.
The map `pai --help` shows is registered at the bottom of this module, one line per command or group;
the groups register their own commands (cli/bench.py, cli/lab.py, cli/jobs.py, `hooks` here)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer
import uvicorn
from rich.table import Table

from eval import judged_sets
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import DatabaseError, connect, pai_home
from retrieval.embed import get_embedder
from retrieval.params import (
    EmbedParams,
    IngestParams,
    MaintainParams,
    ParamsError,
    SearchParams,
    StagingParams,
    load_section,
)
from retrieval.query import staging
from retrieval.query.search import search
from retrieval.scopes import DEFAULT, ScopeError, check
from serving.app import create_app
from serving.interface import SelectorLoadError
from serving.live import install_hook, process_inbox_file
from serving.live import watch as watch_inbox
from serving.selectors import resolve
from serving.server import build_service

from . import assistant, bench, capture, jobs, lab, maintain, pipeline, promote, retrain
from .terminal import FoundParamsOpt, _fail, console, emit, progress_bar

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="pai-brain: retrieval on PostgreSQL + pgvector, a learned selector that picks the context, and a "
    "pipeline that retrains it from feedback.\n\n"
    "Start with `pai ingest PATH` and `pai serve` (or `pai mcp`); once answers cite [n], `pai retrain`. "
    "`pai lab cycle` is the lab's demo on SciFact. "
    "`pai COMMAND --help` for each; docs/ for the rest.",
)


@app.callback()
def unpack_judged_sets() -> None:
    # Before any command: the judged benchmark sets the repository ships (data/judged/), unpacked where missing,
    # so a fresh clone's commands and `dvc repro` read them at their default paths. One line when it unpacks.
    try:
        written = judged_sets.unpack(judged_sets.JUDGED)
    except OSError as e:  # a read-only checkout: only the commands that read them will miss them
        console.print(f"[yellow]warning:[/yellow] could not unpack the judged benchmark sets: {e}", soft_wrap=True)
        return
    if written:
        console.print(f"unpacked {len(written)} judged benchmark files into {judged_sets.JUDGED}", soft_wrap=True)


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files, directories or JSONL corpora")],
    params: FoundParamsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    scope: Annotated[str, typer.Option(help="the scope to store into, e.g. alice/notes")] = DEFAULT,
) -> None:
    """Chunk, scrub, embed and store files; unchanged files write nothing, deleted ones are removed."""
    try:
        check(scope)
        ip = load_section(params, "ingest", IngestParams)
        sp = load_section(params, "search", SearchParams)
        ep = load_section(params, "embed", EmbedParams)
        with connect() as conn, progress_bar() as bar:
            task = bar.add_task("ingest", total=None)
            embedder = get_embedder(ep)
            report = ingest_paths(
                conn, paths, ip, sp, embedder, lambda done, total: bar.update(task, completed=done, total=total), scope
            )
    except (ParamsError, DatabaseError, ScopeError) as e:
        _fail(str(e))
    for err in report.errors:
        console.print(f"[yellow]skipped:[/yellow] {err}", soft_wrap=True)
    t = Table(title="ingest", show_header=False)
    for k, v in report.as_dict().items():
        if k != "errors":
            t.add_row(k, str(v))
    t.add_row("errors", str(len(report.errors)))
    emit(report.as_dict(), as_json, None, t)
    if report.errors and report.documents == 0 and report.documents_deleted == 0:
        _fail(f"nothing ingested: every input failed ({len(report.errors)} error(s) above)")


def query(
    texts: Annotated[list[str], typer.Argument(help="one or more queries (one staging file each)")],
    params: FoundParamsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
    staging_dir: Annotated[Optional[Path], typer.Option(help="override staging.dir")] = None,
    no_staging: Annotated[bool, typer.Option("--no-staging", help="do not write staging files")] = False,
    scope: Annotated[
        Optional[list[str]], typer.Option(help="search only this scope (repeatable); default: every scope")
    ] = None,
) -> None:
    """Search: top-k candidates, the budgeted context, and a staging file per query."""

    texts = [t for t in texts if t.strip()]
    if not texts:
        _fail("empty query")
    try:
        scopes = [check(s) for s in scope] if scope else None
        sp = load_section(params, "search", SearchParams)
        st = load_section(params, "staging", StagingParams)
        ep = load_section(params, "embed", EmbedParams)
        prior = load_section(params, "maintain", MaintainParams).usage_prior
        embedder = get_embedder(ep)
        with connect() as conn:
            results = [search(conn, embedder, t, sp, usage=prior, scopes=scopes) for t in texts]
    except (ParamsError, DatabaseError, ScopeError) as e:
        _fail(str(e))
    directory = staging_dir or st.path()
    out = []
    written = []
    for r in results:
        path = None
        if not no_staging:
            path = staging.write(staging.from_result(r), directory, display_root=os.getcwd())
            written.append(path)
        out.append(
            {
                "query": r.query,
                "staging_file": str(path) if path else None,
                "below_threshold": r.below_threshold,
                "context": [c.chunk_id for c in r.context],
                "candidates": [{k: v for k, v in asdict(c).items() if k != "vector"} for c in r.candidates],
            }
        )
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
            t.add_row(
                str(c.rank),
                f"{c.score:.3f}",
                c.source[-60:],
                f"{c.start_line}-{c.end_line}",
                "✓" if c.chunk_id in ctx else "",
                c.text[:80].replace("\n", " "),
            )
        console.print(t)
        if o["staging_file"]:
            console.print(f"staging file: {o['staging_file']}")


def serve(
    host: Annotated[str, typer.Option(help="bind address (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8484,
    inline: Annotated[
        bool,
        typer.Option("--inline", help="wait for the selector (with a timeout) instead of selecting in the background"),
    ] = False,
    selector: Annotated[
        str,
        typer.Option(
            help="champion: follow the promoted version (hot-swap); or pin one: similarity, "
            "models/export, a .gguf, models/selector (transformers)"
        ),
    ] = "champion",
    timeout: Annotated[float, typer.Option(help="selector timeout, seconds")] = 30.0,
    staging_dir: Annotated[Optional[Path], typer.Option(help="override staging.dir")] = None,
    params: FoundParamsOpt = None,
) -> None:
    """Run the retrieval service (HTTP API; OpenAPI docs at /docs)."""

    try:
        pinned = None if selector == "champion" else resolve(selector)
        service = build_service(params, pinned, inline=inline, staging_dir=staging_dir, timeout_s=timeout, host=host)
    except (ParamsError, DatabaseError, ValueError, SelectorLoadError) as e:
        _fail(str(e))
    if host not in ("127.0.0.1", "localhost", "::1"):  # build_service refused it without a token
        admin = (
            "admin routes need PAI_ADMIN_TOKEN"
            if os.environ.get("PAI_ADMIN_TOKEN")
            else "admin routes are off (set PAI_ADMIN_TOKEN)"
        )
        console.print(
            f"[yellow]warning:[/yellow] listening on {host}, beyond loopback; writes need the bearer token; {admin}"
        )
    follows = "follows the champion" if service.swapper else service.picker.selector.version
    console.print(
        f"pai serve: http://{host}:{port}  (docs: /docs, selector: {follows}, "
        f"{'inline' if inline else 'background'} selection)"
    )
    # uvicorn shuts down gracefully on SIGTERM (docker stop, systemd) as on SIGINT, then raises the
    # signal again; by default SIGTERM would kill the process there, before atexit stops the embedded
    # Postgres and drops our pid from its handle list. Exit like Ctrl-C does instead.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    uvicorn.run(create_app(service), host=host, port=port, log_level="info")


hooks_app = typer.Typer(
    no_args_is_help=True,
    help="Hooks: git commits keep the index current; an assistant's turn end feeds capture and feedback.",
)


def watch(
    inbox: Annotated[Path, typer.Argument(help="folder to watch; files move to processed/ or failed/")],
    params: FoundParamsOpt = None,
) -> None:
    """Ingest every file dropped into INBOX (Ctrl-C to stop)."""

    if not inbox.is_dir():
        _fail(f"{inbox}: not a folder")
    try:
        ip = load_section(params, "ingest", IngestParams)
        sp = load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
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
    params: FoundParamsOpt = None,
) -> None:
    """Add a post-commit hook that re-ingests the files each commit touches."""
    try:
        hook = install_hook(repo, params, pai_home())
    except ValueError as e:
        _fail(str(e))
    console.print(f"installed {hook}")


hooks_app.command("stop")(assistant.hook_stop_command)

# The map: `pai --help` lists these panels in this order, one line per command or group.
USE, RETRAIN, UPKEEP, MEASURE = "Use", "Retrain and deploy", "Upkeep", "Measure"
app.command(rich_help_panel=USE, short_help="Chunk, scrub, embed and store files, folders or JSONL corpora.")(ingest)
app.command(rich_help_panel=USE, short_help="Search: the candidates, the context, a staging file per query.")(query)
app.command(rich_help_panel=USE, short_help="Run the retrieval service (HTTP API); it follows the champion.")(serve)
app.command("mcp", rich_help_panel=USE, short_help="Serve the memory to an assistant as MCP tools.")(
    assistant.mcp_command
)
app.command(rich_help_panel=USE, short_help="Ingest every file dropped into an inbox folder.")(watch)
app.command("capture", rich_help_panel=USE, short_help="Capture facts from conversation exchanges (JSON or JSONL).")(
    capture.capture_command
)
app.add_typer(hooks_app, name="hooks", rich_help_panel=USE, short_help="Git post-commit and assistant turn-end hooks.")
app.command(rich_help_panel=RETRAIN, short_help="Retrain on your store's feedback; a challenger goes on trial.")(
    retrain.retrain
)
app.command("eval", rich_help_panel=RETRAIN, short_help="Evaluate selectors on a benchmark file, side by side.")(
    pipeline.eval_command
)
app.command(rich_help_panel=RETRAIN, short_help="Registry aliases, deployments, what each service did.")(promote.status)
app.command(rich_help_panel=RETRAIN, short_help="Make VERSION the champion; running services hot-swap it.")(
    promote.promote
)
app.command(rich_help_panel=RETRAIN, short_help="Move the champion back to the previous one.")(promote.rollback)
app.add_typer(
    jobs.job_app, name="job", rich_help_panel=RETRAIN, short_help="Pipeline stages in containers (a GPU box)."
)
app.command("maintain", rich_help_panel=UPKEEP, short_help="Garbage-collect, usage weights, VACUUM, HNSW recall.")(
    maintain.maintain_command
)
app.command("migrate", rich_help_panel=UPKEEP, short_help="Create or upgrade the schema, as the database owner.")(
    maintain.migrate_command
)
app.add_typer(
    bench.app,
    name="bench",
    rich_help_panel=MEASURE,
    short_help="Benchmarks: ingest, the store, ranking, the service, capture.",
)
app.add_typer(
    lab.app,
    name="lab",
    rich_help_panel=MEASURE,
    short_help="Lab tools: simulate, loop report, gpu-smoke.",
)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
