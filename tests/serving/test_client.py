"""The Python client against a real `pai serve` (a subprocess, its own embedded Postgres home): typed results,
the service's one-line refusals as ClientError, the token beyond loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from serving.client import Chunk, Client, ClientError
from serving.server import free_port
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def served(tmp_path_factory, pg_server_url):
    """`pai serve` on a free port, against the session's Postgres (a database of its own)."""
    import uuid

    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"client_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    home = tmp_path_factory.mktemp("client-home")
    port = free_port()
    env = os.environ | {
        "DATABASE_URL": make_conninfo(pg_server_url, dbname=name),
        "PAI_HOME": str(home),
        "PAI_WRITE_TOKEN": "w-token",
        "PAI_READ_TOKEN": "r-token",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--selector", "first-stage"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, proc.stderr.read()
        return httpx.get(f"{url}/health", timeout=2).status_code == 200

    wait_for(up, 120, every=0.3, ignore=(httpx.HTTPError,))
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_ingest_context_feedback_capture(served):
    with Client(served) as pai:
        r = pai.ingest("bees", "# Bees\n\nHoney bees store nectar as honey in wax combs.")
        assert r["source"] == "webhook:bees" and r["chunks_inserted"] == 1
        pai.ingest("rivers", "# Rivers\n\nA delta forms where sediment settles at the sea.")
        ctx = pai.context("where do bees keep honey?")
        assert ctx.query_id > 0 and ctx.chunks and ctx.selector == "first-stage"
        top = ctx.chunks[0]
        assert top.source == "webhook:bees" and "wax combs" in top.text and top.n == 1
        assert ctx.prompt().startswith("[1] webhook:bees") and Path(ctx.staging_file).is_file()
        assert len(pai.context("bees", k=1).chunks) == 1
        fb = pai.feedback(ctx.query_id, answer="In wax combs [1].", rating=1)
        assert fb["used_ranks"] == [1]
        receipt = pai.capture("how do deltas form?", "A river delta forms where sediment settles as the current slows.")
        assert receipt.id > 0 and receipt.status == "pending"
        assert pai.capture_outcome(receipt.id)["status"] in ("pending", "stored", "duplicate", "rejected")
        assert pai.health()["status"] == "ok"


def test_refusals_are_client_errors(served):
    with Client(served) as pai:
        with pytest.raises(ClientError) as e:
            pai.feedback(10**12, answer="x")
        assert e.value.status == 404 and "unknown query id" in e.value.message
        for bad in (lambda: pai.context("bees\x00"), lambda: pai.context(""), lambda: pai.ingest("s", "")):
            with pytest.raises(ClientError) as e:
                bad()
            assert e.value.status == 422 and "\n" not in str(e.value)
        with pytest.raises(ClientError, match="k must be a positive integer"):
            pai.context("bees", k=0)
    with Client("http://127.0.0.1:9") as dead, pytest.raises(ClientError) as e:
        dead.context("bees")
    assert e.value.status == 0 and "ConnectError" in e.value.message


def test_beyond_loopback_the_read_token_reads_and_the_write_token_writes(first_stage_service, monkeypatch):
    from serving.server import BackgroundServer

    monkeypatch.setenv("PAI_READ_TOKEN", "r-token")
    monkeypatch.setenv("PAI_WRITE_TOKEN", "w-token")
    monkeypatch.delenv("PAI_ADMIN_TOKEN", raising=False)
    svc = first_stage_service(host="0.0.0.0")  # the service believes it is exposed (it binds loopback)
    with BackgroundServer(svc) as srv:
        with Client(srv.url) as anon, pytest.raises(ClientError) as e:
            anon.context("bees")
        assert e.value.status == 401 and "bearer token" in e.value.message
        with Client(srv.url, token="w-token") as writer:
            writer.ingest("bees", "# Bees\n\nHoney bees store nectar as honey in wax combs.")
        with Client(srv.url, token="r-token") as reader:
            ctx = reader.context("bees")
            with pytest.raises(ClientError) as e:
                reader.feedback(ctx.query_id, answer="[1]")
            assert e.value.status == 401
        with Client(srv.url, token="w-token") as writer:
            assert writer.feedback(ctx.query_id, answer="wax [1]")["used_ranks"] == [1]


def test_a_chunk_cites_its_date_and_the_older_near_ones():
    new = Chunk(2, 7, "notes/sync-10.md", "Finance", 1, 1, "…", "2026-10-10T09:00:00+00:00", (1,))
    assert new.cite() == "[2] notes/sync-10.md:1-1 — Finance (written 2026-10-10, newer than [1])"
    assert Chunk(1, 5, "webhook:a", None, None, None, "…").cite() == "[1] webhook:a"
