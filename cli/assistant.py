"""`pai mcp`: the service as MCP tools for an assistant (serving/mcp_server.py), over stdio or streamable HTTP
(`pai hooks stop`, the assistant's turn-end hook, is in cli/hooks.py)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import anyio
import psycopg
import typer
import uvicorn

from retrieval.db import DatabaseError
from retrieval.params import ParamsError, StagingParams, load_section
from serving.client import Client
from serving.interface import SelectorLoadError
from serving.mcp_server import build_mcp
from serving.mcp_stdio import serve_stdio
from serving.server import BackgroundServer, build_service

from . import mcp_config
from .terminal import USE, FoundParamsOpt, _fail, console

app = typer.Typer()


@app.command("mcp", rich_help_panel=USE, short_help="Serve the memory to an assistant as MCP tools.")
def mcp_command(
    url: Annotated[
        Optional[str], typer.Option(help="a running `pai serve` (default: $PAI_URL; unset: start one in-process)")
    ] = None,
    token: Annotated[
        Optional[str], typer.Option(help="bearer token for the service (default: $PAI_TOKEN); needed beyond loopback")
    ] = None,
    transport: Annotated[str, typer.Option(help="stdio (an assistant starts it) or http (streamable HTTP)")] = "stdio",
    port: Annotated[int, typer.Option(help="with --transport http: the loopback port")] = 8485,
    staging_dir: Annotated[
        Optional[Path],
        typer.Option(
            help="the only dir staging_file reads: with --url, the service's staging dir; in-process, where the "
            "service writes its staging files (default: staging.dir)"
        ),
    ] = None,
    params: FoundParamsOpt = None,
    print_config: Annotated[
        Optional[str],
        typer.Option(
            "--print-config",
            metavar="CLIENT",
            help=f"print the snippet that registers this server with CLIENT ({', '.join(mcp_config.CLIENTS)}), "
            "this `pai` and PAI_HOME pinned, and exit",
        ),
    ] = None,
) -> None:
    """Serve the memory to an assistant as MCP tools: context, expand, feedback, capture, capture_result, remember,
    staging_file. Stops cleanly when stdin closes, on SIGTERM and on Ctrl-C, the in-process service and its
    embedded Postgres with it."""
    if print_config is not None:
        try:
            text, notes = mcp_config.print_config(print_config)
        except mcp_config.ConfigError as e:
            _fail(str(e))
        for note in notes:
            console.print(note, soft_wrap=True, markup=False)
        print(text)
        return
    if transport not in ("stdio", "http"):
        _fail(f"--transport must be stdio or http, not {transport!r}")
    url = url or os.environ.get("PAI_URL")
    token = token or os.environ.get("PAI_TOKEN")
    # until the stdio loop takes the signals over (and for uvicorn, which re-raises them once it has stopped):
    # unwind on SIGTERM like Ctrl-C, so the in-process service and the embedded Postgres stop, and our pid
    # leaves Postgres' handle list; by default SIGTERM kills the process on the spot
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    stopped = None
    try:
        with contextlib.ExitStack() as stack:
            if url is None:
                url, staging = stack.enter_context(_in_process_service(params, staging_dir))
            else:
                staging = staging_dir or _staging_dir(params)
            client = stack.enter_context(Client(url, token))
            server = build_mcp(client, staging)
            console.print(f"pai mcp: {transport} in front of {url}")
            if transport == "stdio":
                stopped = anyio.run(serve_stdio, server)
            else:  # loopback only: beyond it the service's own token rules apply, not an MCP auth layer
                app = server.streamable_http_app(host="127.0.0.1")
                uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
            for signum in (signal.SIGTERM, signal.SIGINT):  # stopping already: a second signal must not cut it short
                signal.signal(signum, signal.SIG_IGN)
    except KeyboardInterrupt:  # Ctrl-C while starting
        stopped = signal.SIGINT
    except SystemExit as e:  # SIGTERM while starting (the handler above): unwound; now leave as fast as below
        if not (isinstance(e.code, int) and e.code > 128):
            raise
        stopped = e.code - 128
    # The service is stopped. atexit stops the embedded Postgres (when this was its last user); then leave at once:
    # the interpreter's own teardown (the embedding runtime's) takes 2-3 s more, past a client's grace before it
    # kills the server (the TypeScript SDK's: 2 s).
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(128 + stopped if stopped else 0)


def _staging_dir(params: Path | None) -> Path:
    """staging.dir of the params (`retrieval.params.params_files`: an assistant may start us in any folder)."""
    try:
        return load_section(params, "staging", StagingParams).path()
    except ParamsError as e:
        _fail(str(e))


@contextlib.contextmanager
def _in_process_service(params: Path | None, staging_dir: Path | None):
    """`pai serve`'s service on a free loopback port in this process: (its url, its staging dir). Started with
    fd 1 pointed at stderr: on stdio, stdout is the protocol's, and nothing the embedded Postgres prints may
    reach it."""
    saved = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        try:
            service = build_service(params, staging_dir=staging_dir)
            server = BackgroundServer(service)
            server.__enter__()
        except (ParamsError, DatabaseError, ValueError, SelectorLoadError, RuntimeError) as e:
            _fail(str(e))
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    if not os.environ.get("DATABASE_URL"):
        _checkpoint(service)
    try:
        yield server.url, service.staging.path()
    finally:
        server.__exit__(None, None, None)


def _checkpoint(service) -> None:
    """Write the embedded Postgres' dirty pages now, at start: its shutdown checkpoint then has only this session's
    to write, and the stop fits a client's grace (after a first start, initdb and the migrations left seconds of
    writing to it on a busy machine: docs/measurements.md). Best effort: a failure only makes the stop slower."""
    if service.pool is None:  # the app's start-up opens it; not started, nothing to write
        return
    with contextlib.suppress(psycopg.Error), service.pool.connection() as conn:
        conn.execute("CHECKPOINT")
