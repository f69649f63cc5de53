"""`pai mcp` on stdio answers every line: a line that is not JSON is a -32700 parse error, JSON that is no message
or holds a lone surrogate a -32600 invalid request (with its id, so the client's request ends), and the server goes
on serving. Literal lines in and out, then the real process on raw pipes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import mcp_types as types

from serving.mcp_stdio import read_line

REPO = Path(__file__).resolve().parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
SURROGATE = (
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"context","arguments":{"query":"\\ud800"}}}'
)


def error_of(line: bytes) -> tuple:
    r = read_line(line)
    return (r.id, r.error.code) if isinstance(r, types.JSONRPCError) else r


def test_each_bad_line_has_its_answer():
    assert error_of(b"not json\n") == (None, -32700)
    assert error_of(b'{"jsonrpc": "2.0", "id": 7, "method": \n') == (None, -32700)  # cut short
    assert error_of(b'"\xff\xfe"\n') == (None, -32700)  # not UTF-8
    assert error_of(SURROGATE + b"\n") == (2, -32600)  # valid JSON, not text
    assert error_of(b'{"id": 3}\n') == (3, -32600)
    assert error_of(b'{"id": true, "method": "ping"}\n') == (None, -32600)
    assert error_of(b"[1, 2]\n") == (None, -32600)  # a batch: not in MCP
    assert error_of(b"42\n") == (None, -32600)
    assert read_line(b"  \n") is None
    ping = read_line(b'{"jsonrpc": "2.0", "id": "a", "method": "ping"}\n')
    assert ping.message.method == "ping" and ping.message.id == "a"


def test_the_process_answers_bad_lines_and_goes_on():
    # a service that is not there: nothing here needs one
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "mcp", "--url", "http://127.0.0.1:9"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def ask(raw: bytes, timeout: float = 5.0) -> dict:
        proc.stdin.write(raw + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        assert ready, f"no answer to {raw[:80]!r} in {timeout} s"
        return json.loads(proc.stdout.readline())

    try:
        assert ask(json.dumps(INIT).encode(), timeout=60)["result"]["serverInfo"]["name"] == "pai-brain"
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for raw, rid, code in (
            (b"not json", None, -32700),
            (SURROGATE, 2, -32600),
            (b'{"id": 3}', 3, -32600),
            (b"[1, 2]", None, -32600),
            (b"\xff\xfe{}", None, -32700),
        ):
            r = ask(raw)
            assert (r["id"], r["error"]["code"]) == (rid, code), r
        assert ask(b'{"jsonrpc": "2.0", "id": 4, "method": "ping"}') == {"jsonrpc": "2.0", "id": 4, "result": {}}
        r = ask(
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"feedback","arguments":{"query_id":1}}}'
        )
        assert r["id"] == 5 and r["result"]["isError"]  # the tools still answer (here: the service is unreachable)
        proc.stdin.close()
        t0 = time.monotonic()
        assert proc.wait(timeout=10) == 0 and time.monotonic() - t0 < 2.0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert b"Traceback" not in proc.stderr.read()
