"""`pai mcp` over stdio: one JSON-RPC message a line on stdin, one a line on stdout, as the MCP stdio transport
says, with every line answered. The SDK's own stdio reader drops a line it cannot parse (or one holding a lone
surrogate, `"\\ud800"`: valid JSON, not text) without a reply, and the client waits out its timeout; here such a line
gets the JSON-RPC error the HTTP transport gives: -32700 (parse error) for a line that is not JSON in UTF-8, -32600
(invalid request, with the request's id when it has one) for JSON that is not a message or holds a lone surrogate.

`serve_stdio` runs a server until stdin closes or SIGTERM or SIGINT arrives, whichever is first, and returns the
signal (None: stdin closed). stdin is read by a daemon thread, so a signal never waits for a line to arrive.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from contextlib import asynccontextmanager

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

FLUSH_S = 1.0  # on the way out, how long the answers already given may take to reach stdout


def _error(rid: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message))


def read_line(line: bytes) -> SessionMessage | types.JSONRPCError | None:
    """One line of stdin as a message for the server, or the error that answers it; None for a blank line."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, a number too long, nesting too deep
        return _error(None, types.PARSE_ERROR, "Parse error: a line must be one JSON-RPC message, in UTF-8")
    rid = obj.get("id") if isinstance(obj, dict) else None
    rid = rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _error(rid, types.INVALID_REQUEST, "Invalid Request: holds a lone surrogate (\\ud800-\\udfff), not text")
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(obj, by_name=False))
    except ValidationError:
        return _error(
            rid, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
        )


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


@asynccontextmanager
async def stdio_streams():
    """(read stream, write stream) over this process's stdin and stdout. While they are open, fd 0 reads
    /dev/null and fd 1 writes to stderr: nothing else in the process (the in-process service, a library, a child
    process) can take the protocol's input or write into its output."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)  # never closed: the reader thread may still block on wire_in
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    token = anyio.lowlevel.current_token()

    async def deliver(item: SessionMessage | types.JSONRPCError) -> None:
        if isinstance(item, SessionMessage):
            await read_send.send(item)
        else:  # a bad line is answered at once, and the server never sees it
            await write_send.send(SessionMessage(item))

    def reader() -> None:
        try:
            with os.fdopen(wire_in, "rb", closefd=False) as lines:
                for line in lines:
                    if (item := read_line(line)) is not None:
                        anyio.from_thread.run(deliver, item, token=token)
            anyio.from_thread.run(read_send.aclose, token=token)  # EOF: the server's loop ends
        except Exception:  # noqa: BLE001 - the server stopped first (its streams closed, its loop gone): nothing to do
            pass

    flushed = anyio.Event()

    async def writer() -> None:
        try:
            async with write_recv:
                async for m in write_recv:
                    data = m.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
                    await anyio.to_thread.run_sync(_write_all, wire_out, data)
        except OSError:  # the client closed its end: nobody reads answers any more
            pass
        finally:
            flushed.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            threading.Thread(target=reader, name="mcp-stdin", daemon=True).start()
            try:
                yield read_recv, write_send
            finally:
                write_send.close()  # the writer writes what it was given, then ends
                with anyio.move_on_after(FLUSH_S, shield=True):
                    await flushed.wait()
                tg.cancel_scope.cancel()
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


async def serve_stdio(server: Server) -> int | None:
    """Serve `server` on stdio until stdin closes (None) or SIGTERM / SIGINT arrives (the signal's number)."""
    stopped: int | None = None
    async with anyio.create_task_group() as tg:

        async def on_signal() -> None:
            nonlocal stopped
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    stopped = signum
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(on_signal)
        async with stdio_streams() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()
    return stopped
