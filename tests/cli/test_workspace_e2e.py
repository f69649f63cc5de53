"""Two stores used from one checkout, each retrained (`pai retrain --ranker-only`, real dvc, real Postgres): each
pulled log holds only its own queries (counted), each watermark names its own store, and neither's models or
metrics overwrite the other's (hashed). The stores: two databases on the test's server, one home (so one MLflow
registry too, the harder case: DATABASE_URL switched in one shell).

It clones the repository, so it tests what is committed."""

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from retrieval.db import connect, store_id

REPO = Path(__file__).resolve().parents[2]
MODELS_AND_METRICS = (
    "models/ranker/adapter.npy",
    "models/ranker/ranker_config.json",
    "metrics/eval.json",
    "metrics/deploy.json",
    "data/feedback/metrics.json",
    "dvc.lock",
)


def sha(folder: Path) -> dict[str, str]:
    return {p: hashlib.sha256((folder / p).read_bytes()).hexdigest() for p in MODELS_AND_METRICS}


def pulled(folder: Path) -> tuple[list[str], dict]:
    log = [json.loads(line)["query"] for line in (folder / "data/feedback/feedback.jsonl").read_text().splitlines()]
    return log, json.loads((folder / "data/feedback/watermark.json").read_text())


@pytest.mark.slow
def test_two_stores_retrained_from_one_checkout_keep_their_own_logs_models_and_metrics(
    db_url, pg_server_url, template_db, tmp_path
):
    clone = tmp_path / "p"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    params = (clone / "params.yaml").read_text().replace("lag_seconds: 5.0", "lag_seconds: 0.0")
    params = params.replace("  max_queries: 0 ", "  max_queries: 20 ")  # evaluate: 20 items a benchmark
    params = params.replace("  queries: 300 ", "  queries: 60 ")  # code_bench: a smaller out-of-domain set
    (clone / "params.yaml").write_text(params)
    other = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {other} TEMPLATE {template_db}")
    urls = {"a": db_url, "b": make_conninfo(pg_server_url, dbname=other)}
    with connect(urls["b"]) as conn:  # a template's copy carries its identity: the second store gets its own
        conn.execute("UPDATE store_identity SET id = gen_random_uuid()")
    stores = {}
    for k, url in urls.items():
        with connect(url) as conn:
            stores[k] = store_id(conn)
    home = tmp_path / ".pai"
    home.mkdir()
    (REPO / ".pai" / "cache").mkdir(parents=True, exist_ok=True)
    (home / "cache").symlink_to(REPO / ".pai" / "cache")
    venv_bin = Path(sys.executable).parent
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if Path(d) != venv_bin)

    said: list[str] = []  # each command's log lines (stderr); stdout is its JSON where asked

    def pai(store: str, *args: str) -> str:
        env = os.environ | {"PAI_HOME": str(home), "DATABASE_URL": urls[store], "PYTHONPATH": str(clone), "PATH": path}
        env.pop("MLFLOW_TRACKING_URI", None)
        run = subprocess.run(
            [sys.executable, "-m", "cli.main", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=1500
        )
        assert run.returncode == 0, f"pai {' '.join(args)} ({store}):\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
        said.append(run.stdout + run.stderr)
        return run.stdout

    try:
        # each store's own traffic: a slice of SciFact's train claims, served and cited (pai lab simulate)
        pai("a", "lab", "simulate", "--max-queries", "45", "--corpus-limit", "20", "--json")
        # B's 40: its retrain needs 30 cited queries, and a consumer's draws cite in about 80 % of them
        pai("b", "lab", "simulate", "--max-queries", "40", "--offset", "45", "--corpus-limit", "20", "--json")
        counts = {}  # each store's logged queries, one text per query (a claim asked twice counts twice)
        for k, url in urls.items():
            with connect(url) as conn:
                counts[k] = [t for (t,) in conn.execute("SELECT text FROM queries ORDER BY id")]
        assert len(counts["a"]) >= 45 and len(counts["b"]) >= 40 and not set(counts["a"]) & set(counts["b"])

        pai("a", "retrain", "--ranker-only")
        a_log, a_mark = pulled(clone)
        assert sorted(a_log) == sorted(counts["a"]) and a_mark["store"] == stores["a"]
        a_hash = sha(clone)

        pai("b", "retrain", "--ranker-only")
        assert f"output(s) of store {stores['a']} (marker) in .pai-workspaces/{stores['a']}" in said[-1], said[-1]
        b_log, b_mark = pulled(clone)  # B's run read none of A's rows: ids start at 1 in both databases
        assert sorted(b_log) == sorted(counts["b"]) and b_mark["store"] == stores["b"]
        b_hash = sha(clone)
        parked_a = clone / ".pai-workspaces" / stores["a"]
        assert sha(parked_a) == a_hash  # A's models and metrics as A's retrain left them
        assert pulled(parked_a) == (a_log, a_mark)
        assert a_hash["models/ranker/adapter.npy"] != b_hash["models/ranker/adapter.npy"]

        status = json.loads(pai("b", "status", "--json"))
        assert status["workspace"]["store"] == stores["b"] and status["workspace"]["this_store"]

        pai("a", "retrain", "--ranker-only")  # A again: its own log back, nothing new to pull, B's parked intact
        again, mark = pulled(clone)
        assert sorted(again) == sorted(counts["a"]) and mark["store"] == stores["a"]
        parked_b = clone / ".pai-workspaces" / stores["b"]
        assert sha(parked_b) == b_hash and pulled(parked_b) == (b_log, b_mark)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")
