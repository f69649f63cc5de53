"""`pai mcp` and `pai hooks stop` (cli/assistant.py) in front of their cores: a bad transport is one line, the
turn-end hook never fails the assistant (a transcript with no finished exchange is one line, exit 0), and `pai mcp`
with the service in-process stops with its Postgres, whatever stops it. The hook against a real service:
tests/serving/test_transcript.py; the MCP tools: tests/serving/test_mcp_server.py and test_mcp_stdio.py."""

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from tests.waiting import wait_for

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def start_mcp(tmp_path: Path) -> subprocess.Popen:
    """`pai mcp` as an assistant starts it: from a folder of its own, no DATABASE_URL, a home of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PAI_URL")}
    env |= {"PAI_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "mcp", "--params", str(REPO / "params.yaml")],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_mcp_refuses_an_unknown_transport_in_one_line():
    r = runner.invoke(app, ["mcp", "--transport", "carrier-pigeon", "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "--transport must be stdio or http, not 'carrier-pigeon'" in r.output
    assert "Traceback" not in r.output


def test_the_stop_hook_with_no_finished_exchange_says_so_and_exits_0(tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"content": "a question with no answer"}}) + "\n")
    r = runner.invoke(app, ["hooks", "stop", "--transcript", str(transcript), "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 0 and "pai hooks stop: no finished exchange in the transcript" in r.output
    r = runner.invoke(app, ["hooks", "stop", "--url", "http://127.0.0.1:9"], input='{"session_id": "s"}')
    assert r.exit_code == 0 and "hook input on stdin has no transcript_path" in r.output


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.mark.parametrize("stop", ["eof", "SIGTERM", "SIGINT", "eof-then-SIGTERM"])
def test_in_process_mcp_stops_with_its_postgres_within_2_s(tmp_path, stop):
    """`pai mcp` with the service in-process: stdin closed (an assistant's client going away), SIGTERM, Ctrl-C, or
    stdin closed and SIGTERM soon after (the TypeScript SDK's sequence, were it impatient): out in under 2 s (the
    SDK's grace), the embedded Postgres stopped and this process gone from its handle list."""
    proc = start_mcp(tmp_path)
    pgdata = tmp_path / "home" / "pg"
    try:
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 180)
        assert ready and json.loads(proc.stdout.readline())["result"]["serverInfo"]["name"] == "pai-brain"
        assert (pgdata / "postmaster.pid").exists() and proc.pid in json.loads(
            (pgdata / ".handle_pids.json").read_text()
        )
        t0 = time.monotonic()
        if stop.startswith("eof"):
            proc.stdin.close()
        if stop.endswith("SIGTERM"):
            time.sleep(0.3 if stop.startswith("eof") else 0)
            proc.send_signal(signal.SIGTERM)
        elif stop == "SIGINT":
            proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().decode()
    assert "Traceback" not in err, err
    # stdin closed, then SIGTERM: 0 when the signal came once it was stopping (ignored), 143 when before
    assert rc in {"eof": {0}, "SIGTERM": {143}, "SIGINT": {130}, "eof-then-SIGTERM": {0, 143}}[stop], err
    assert took < 2.0, f"{stop}: {took:.2f} s"
    assert not (pgdata / "postmaster.pid").exists()  # Postgres stopped with us
    assert proc.pid not in json.loads((pgdata / ".handle_pids.json").read_text() or "[]")


def test_in_process_mcp_stopped_while_starting_leaves_within_2_s_with_its_postgres(tmp_path):
    """The TypeScript SDK gives up on a server that has not answered `initialize` in 60 s (a first start on a busy
    machine: the models still loading): stdin closed, 2 s, SIGTERM, 2 s, SIGKILL. A SIGTERM while the in-process
    service starts must stop it and its Postgres before the SIGKILL, else Postgres runs on, a dead pid in its list."""
    pgdata = tmp_path / "home" / "pg"
    proc = start_mcp(tmp_path)
    try:
        handles = pgdata / ".handle_pids.json"

        def counted() -> bool:  # Postgres is up and counts us: then the service is still starting (the models loading)
            assert proc.poll() is None, proc.stderr.read().decode()
            return handles.exists() and proc.pid in json.loads(handles.read_text() or "[]")

        def loading_models() -> bool:  # torch's library mapped: the models are loading, a teardown now takes 2-3 s
            return counted() and "libtorch" in Path(f"/proc/{proc.pid}/maps").read_text()

        wait_for(counted, 180)
        wait_for(loading_models, 180, why=lambda: "torch never loaded while starting")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and proc.stdout.read() == b"", err  # nothing on the protocol's stdout
    assert rc == 143 and took < 2.0, (rc, f"{took:.2f} s", err)
    assert not (pgdata / "postmaster.pid").exists()
    assert proc.pid not in json.loads((pgdata / ".handle_pids.json").read_text() or "[]")
