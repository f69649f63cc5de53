"""The images built and run with podman (slow; skipped without podman: bash containers/podman-setup.sh):
containers/build.sh builds the serve and the CPU train image (layer-cached: seconds when nothing changed);
the service container, published on the host's loopback and listening beyond its own (so it needs a token,
as compose runs it), answers /health, ingests and answers /query, on its embedded PostgreSQL (data in a
volume that outlives the container) and on Debian's PostgreSQL 15 through DATABASE_URL; `pai job run pull`
runs the pull stage in the train container against that database and writes the feedback file."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from cli import jobs as cli_jobs
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
SERVE = "pai-brain/serve:local"
TOKEN = "container-test-" + uuid.uuid4().hex
NOTES = {
    "pg-vacuum": "# Vacuum\nAutovacuum reclaims dead tuples; run VACUUM ANALYZE after a bulk delete.",
    "kettle": "# Kettle\nDescale the kettle with citric acid once a month.",
}
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed (bash containers/podman-setup.sh)"),
]


def podman(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)


def build(image: str) -> None:
    r = subprocess.run(["bash", "containers/build.sh", image], cwd=REPO, timeout=3600, check=False)
    assert r.returncode == 0, f"containers/build.sh {image} failed (its output is above)"


@pytest.fixture(scope="module")
def serve_image():
    build("serve")


@pytest.fixture(scope="module")
def train_image():
    build("train")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def service(*run_args: str, env: dict[str, str] | None = None):
    """The serve image as compose runs it (pai serve --host 0.0.0.0), published on 127.0.0.1; yields
    (base URL, seconds from `podman run` to the first 200 from /health). Variables go by name (-e NAME)."""
    name, port = f"pai-test-serve-{uuid.uuid4().hex[:8]}", free_port()
    env = {"PAI_WRITE_TOKEN": TOKEN, **(env or {})}
    names = [a for k in env for a in ("-e", k)]
    t0 = time.monotonic()
    r = podman(
        "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8484", *names, *run_args, SERVE, env=os.environ | env
    )
    assert r.returncode == 0, r.stderr
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        state = podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
        assert state == "true", f"the service container exited:\n{podman('logs', name).stderr[-3000:]}"
        return httpx.get(f"{url}/health", timeout=5).status_code == 200

    try:
        wait_for(healthy, 600, 0.5, ignore=(httpx.TransportError,), why=lambda: podman("logs", name).stderr[-3000:])
        ready_s = time.monotonic() - t0
        print(f"service container {name}: /health 200 after {ready_s:.1f} s", file=sys.stderr)
        yield url, ready_s
    finally:
        podman("stop", "-t", "30", name)
        logs = podman("logs", name).stderr
        podman("rm", "-f", name)
        assert "Traceback" not in logs, logs[-3000:]


def ingest_and_query(url: str) -> dict:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(f"{url}/ingest", json={"source": "x", "text": "t"}, timeout=30).status_code == 401  # no token
    for source, text in NOTES.items():
        r = httpx.post(f"{url}/ingest", json={"source": source, "text": text}, headers=auth, timeout=120)
        assert r.status_code == 200 and r.json()["chunks_inserted"] >= 1, r.text
    assert httpx.post(f"{url}/query", json={"query": "vacuum"}, timeout=30).status_code == 401
    r = httpx.post(f"{url}/query", json={"query": "how do I reclaim dead tuples?"}, headers=auth, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["candidates"] and body["candidates"][0]["source"] == "webhook:pg-vacuum", body["candidates"]
    return body


def test_service_container_on_its_embedded_postgres_keeps_data_in_a_volume(serve_image):
    volume = f"pai-test-home-{uuid.uuid4().hex[:8]}"
    try:
        with service("-v", f"{volume}:/home/pai/.pai") as (url, _):
            health = httpx.get(f"{url}/health", timeout=10).json()
            assert health["status"] == "ok" and health["chunks"] == 0, health
            ingest_and_query(url)
            chunks = httpx.get(f"{url}/health", timeout=10).json()["chunks"]
        with service("-v", f"{volume}:/home/pai/.pai") as (url, _):  # a new container, the same volume
            assert httpx.get(f"{url}/health", timeout=10).json()["chunks"] == chunks >= len(NOTES)
    finally:
        podman("volume", "rm", "-f", volume)


@pytest.fixture
def pg15_socket_url(debian15_url):
    """Debian's PostgreSQL 15 (tests/conftest.py): its socket folder opened to the container's user, who is not
    `postgres`; the folder is mounted at the same path so DATABASE_URL means the same inside."""
    folder = conninfo_to_dict(debian15_url)["host"]
    os.chmod(folder, 0o755)
    with psycopg.connect(debian15_url, autocommit=True) as conn:
        db = f"pai_containers_{uuid.uuid4().hex[:8]}"
        conn.execute(f"CREATE DATABASE {db}")
    yield f"host={folder} port=5432 user=postgres dbname={db}", folder


def serve_on(url_db: str, folder: str) -> int:
    """The service on DATABASE_URL (its socket folder mounted): ingest and one query; the query's id."""
    with service("-v", f"{folder}:{folder}", env={"DATABASE_URL": url_db}) as (url, _):
        health = httpx.get(f"{url}/health", timeout=10).json()
        assert health["status"] == "ok" and health["chunks"] == 0, health
        return ingest_and_query(url)["query_id"]


def test_service_container_on_a_database_url(serve_image, pg15_socket_url):
    url_db, folder = pg15_socket_url
    qid = serve_on(url_db, folder)
    with psycopg.connect(url_db) as conn:  # it wrote to that database, not to an embedded one
        assert conn.execute("SELECT count(*) FROM queries WHERE id = %s", (qid,)).fetchone() == (1,)


def test_job_container_pulls_the_log_the_service_wrote(serve_image, train_image, pg15_socket_url, tmp_path):
    url_db, folder = pg15_socket_url
    qid = serve_on(url_db, folder)
    # `pai job run pull` in the train container, in a copy of the repository (the job writes data/feedback)
    repo = tmp_path / "repo"
    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, tracked.split("\0")):
        if (REPO / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, repo / rel)
    (repo / ".dvc" / "config.local").write_text("[core]\n    no_scm = true\n")  # a copy without .git
    params = (repo / "params.yaml").read_text()
    assert "  lag_seconds: 5.0 " in params  # the pull waits this long for late commits: not here
    (repo / "params.yaml").write_text(params.replace("  lag_seconds: 5.0 ", "  lag_seconds: 0.0 "))
    env = {**os.environ, "DATABASE_URL": url_db, "PAI_DVC_STORE": str(tmp_path / "store"), "PYTHONPATH": str(REPO)}
    job = [sys.executable, "-m", "cli.main", "job", "run", "pull", "--no-gpu", "--engine", "podman", "--json"]
    t0 = time.monotonic()
    r = subprocess.run(job, cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False)
    print(f"pai job run pull: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout)
    assert out["returncode"] == 0 and out["command"][-2:] == [cli_jobs.IMAGES[False], "pull"]
    rows = [json.loads(line) for line in (repo / "data" / "feedback" / "feedback.jsonl").read_text().splitlines()]
    assert qid in {row["query_id"] for row in rows}, rows
