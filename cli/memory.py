"""`pai ingest`, `pai query`, `pai serve`: put files into the memory, search it, serve it (HTTP API). Each
command: parse -> call the core (retrieval/, serving/) -> print."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer
import uvicorn
from rich.table import Table

from retrieval.corpus import expiry, runs
from retrieval.corpus.ingest import ingest_paths
from retrieval.corpus.sources import resolved
from retrieval.db import DatabaseError, connect
from retrieval.embed import get_embedder
from retrieval.params import (
    EmbedParams,
    ForgetParams,
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
from serving.selectors import resolve
from serving.server import build_service

from .terminal import USE, FoundParamsOpt, _fail, console, emit, progress_bar

app = typer.Typer()


@app.command("ingest", rich_help_panel=USE, short_help="Chunk, scrub, embed and store files, folders or JSONL corpora.")
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files, directories or JSONL corpora")],
    params: FoundParamsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    scope: Annotated[str, typer.Option(help="the scope to store into, e.g. alice/notes")] = DEFAULT,
    expires: Annotated[
        Optional[str],
        typer.Option(help="when these memories expire: days (30d), a date, or never; default: params forget.expiry_*"),
    ] = None,
) -> None:
    """Chunk, scrub, embed and store files; unchanged files write nothing, deleted ones are removed."""
    try:
        check(scope)
        until = expiry.parse(expires) if expires is not None else None
        fp = load_section(params, "forget", ForgetParams)
        ip = load_section(params, "ingest", IngestParams)
        sp = load_section(params, "search", SearchParams)
        ep = load_section(params, "embed", EmbedParams)
        with connect() as conn, progress_bar() as bar:
            task = bar.add_task("ingest", total=None)
            embedder = get_embedder(ep)
            report = ingest_paths(
                conn, paths, ip, sp, embedder, lambda done, total: bar.update(task, completed=done, total=total), scope
            )
            if expires is not None:
                expiry.set_for_paths(conn, [resolved(p) for p in paths], scope, until)
            else:
                expiry.stamp_defaults(conn, fp)
            runs.record(conn, "cli", scope, report)  # the web page's health lists the last ingests and their errors
    except (ParamsError, DatabaseError, ScopeError, expiry.ExpiryError) as e:
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


@app.command("query", rich_help_panel=USE, short_help="Search: the candidates, the context, a staging file per query.")
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


@app.command("serve", rich_help_panel=USE, short_help="Run the retrieval service (HTTP API); it follows the champion.")
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
            help="champion: follow the promoted version (hot-swap); or pin one: first-stage, "
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
