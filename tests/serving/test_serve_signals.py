"""`pai serve` stopped with SIGTERM (docker stop, systemd) shuts down as cleanly as with Ctrl-C: the
embedded Postgres it started is stopped and its handle list no longer names the process."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from serving.server import free_port
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_pai_serve_stops_cleanly_on_sigterm_as_on_sigint(tmp_path, sig):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"PAI_HOME": str(tmp_path / "home")}
    port = free_port()
    pai = Path(sys.executable).with_name("pai")
    proc = subprocess.Popen(
        [
            str(pai),
            "serve",
            "--port",
            str(port),
            "--selector",
            "first-stage",
            "--params",
            str(REPO / "params.yaml"),
            "--staging-dir",
            str(tmp_path / "st"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def healthy() -> bool:
            assert proc.poll() is None, proc.stdout.read()  # died while starting: its output says why
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200

        wait_for(healthy, 180, every=0.5, ignore=(httpx.HTTPError,))
        pgdata = tmp_path / "home" / "pg"
        assert (pgdata / "postmaster.pid").exists()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in out, out
    handles = pgdata / ".handle_pids.json"
    assert not handles.exists() or proc.pid not in json.loads(handles.read_text() or "[]"), handles.read_text()
    wait_for(lambda: not (pgdata / "postmaster.pid").exists(), 20, every=0.2)  # postgres stopped with us
