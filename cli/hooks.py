"""What keeps the memory current without a manual `pai ingest`: `pai watch` (an inbox folder), and the `pai hooks`
group: `install` (a git post-commit hook that re-ingests what each commit touches) and `stop` (an assistant's
turn-end hook: capture and feedback from its transcript)."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from retrieval.db import DatabaseError, connect, pai_home
from retrieval.embed import get_embedder
from retrieval.params import EmbedParams, IngestParams, ParamsError, SearchParams, load_section
from serving.client import Client
from serving.live import install_hook, process_inbox_file
from serving.live import watch as watch_inbox
from serving.transcript import last_exchange, post_exchange

from .terminal import USE, FoundParamsOpt, _fail, console

app = typer.Typer()  # `pai watch`
hooks_app = typer.Typer(
    no_args_is_help=True,
    help="Hooks: git commits keep the index current; an assistant's turn end feeds capture and feedback.",
)


@app.command("watch", rich_help_panel=USE, short_help="Ingest every file dropped into an inbox folder.")
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


@hooks_app.command("stop")
def hook_stop_command(
    url: Annotated[
        Optional[str], typer.Option(help="the service (default: $PAI_URL, else http://127.0.0.1:8484)")
    ] = None,
    token: Annotated[
        Optional[str], typer.Option(help="write token (default: $PAI_TOKEN); needed beyond loopback")
    ] = None,
    source: Annotated[str, typer.Option(help="who the exchange comes from")] = "claude-code",
    transcript: Annotated[
        Optional[Path], typer.Option(help="a transcript JSONL (default: the hook input's transcript_path on stdin)")
    ] = None,
) -> None:
    """An assistant's turn-end hook: capture the last exchange of its transcript, and post its answer as
    feedback to the memory queries it made (the [n] it cites label them). Never fails the assistant: any
    problem is one line on stderr, exit 0."""
    session = None
    try:
        if transcript is None:
            hook = json.loads(sys.stdin.read() or "{}")
            if not isinstance(hook, dict) or not isinstance(hook.get("transcript_path"), str):
                raise ValueError("hook input on stdin has no transcript_path")
            transcript, session = Path(hook["transcript_path"]), hook.get("session_id")
        ex = last_exchange(transcript)
        if ex is None:
            console.print("pai hooks stop: no finished exchange in the transcript")
            return
        with Client(url, token or os.environ.get("PAI_TOKEN"), timeout=30) as client:
            done = post_exchange(client, ex, source, session if isinstance(session, str) else None)
    except Exception as e:  # noqa: BLE001 - a hook must never fail the assistant's turn: one line, exit 0
        console.print(f"pai hooks stop: {str(e).splitlines()[0] if str(e) else type(e).__name__}", soft_wrap=True)
        return
    fed = ", ".join(f"{f['query_id']} used {f['used_ranks']}" for f in done["feedback"]) or "none"
    console.print(f"pai hooks stop: capture {done['captured']}; feedback {fed}", soft_wrap=True)
    for err in done["errors"]:
        console.print(f"pai hooks stop: {err}", soft_wrap=True)
