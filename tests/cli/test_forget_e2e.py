"""The whole path of a note with a unique marker, then `pai forget`: ingested and served over HTTP, cited, pulled,
built into training data, versioned by DVC (its cache and a local remote, pushed), logged to MLflow (an artifact)
and a selector registered after; `pai forget --remote` it; `--verify` finds it nowhere and the selector is marked."""

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from retrieval.params import IngestParams, SearchParams, StagingParams, UsedParams
from retrieval.tracking import SELECTOR_MODEL, use_mlflow
from serving.picker import Picker
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer
from serving.service import Service
from training.build import BuildParams, build_examples
from training.pull import PullParams, pull

MARKER = "wombat-cipher-9052"
NOTES = {
    "shed": f"# Shed\n\nThe garden shed padlock code is {MARKER}, changed every spring.",
    "bees": "# Bees\n\nHoney bees collect nectar from flowers and store it as honey in wax combs.",
    "rivers": "# Rivers\n\nRivers carry fresh water from mountains down to the sea, shaping valleys.",
}
REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def dvc(proj, *args):
    subprocess.run([sys.executable, "-m", "dvc", *args], cwd=proj, check=True, capture_output=True, text=True)


@pytest.mark.slow
def test_a_marker_through_every_place_then_forgotten(db_url, embedder, conn, tmp_path, monkeypatch):
    proj, home, st = tmp_path / "proj", tmp_path / "home", tmp_path / "staging"
    proj.mkdir()
    monkeypatch.setenv("PAI_HOME", str(home))
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(proj)
    client = use_mlflow().MlflowClient()
    client.create_registered_model(SELECTOR_MODEL)

    # 1. ingested, served, cited (through the HTTP service)
    svc = Service(
        db_url,
        embedder,
        Picker(FirstStageSelector(), timeout_s=30),
        SearchParams(threshold=0.0),
        IngestParams(),
        StagingParams(dir=str(st)),
        inline=True,
    )
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        for name, text in NOTES.items():
            http.post("/ingest", json={"source": name, "text": text}).raise_for_status()
        for q in ("what is the garden shed padlock code?", "how do bees make honey?"):
            r = http.post("/query", json={"query": q}).json()
            n = next(i for i, c in enumerate(r["context"], start=1) if "shed" in c["source"] or "bees" in c["source"])
            answer = f"The code is {MARKER} [{n}]." if "shed" in q else f"Bees make honey [{n}]."
            http.post("/feedback", json={"query_id": r["query_id"], "answer": answer, "rating": 1}).raise_for_status()
    # 2. pulled and built, as the pipeline's stages write them
    conn.execute("UPDATE queries SET updated_at = now() - interval '1 minute'")
    pull(PullParams(out="data/feedback", lag_seconds=0))
    records = [json.loads(line) for line in open("data/feedback/feedback.jsonl")]
    splits, pairs, _ = build_examples(records, BuildParams(val_fraction=0.5, include_empty=True), UsedParams())
    (proj / "data" / "datasets").mkdir()
    for name, rows in {**splits, "pairs": pairs}.items():
        (proj / "data" / "datasets" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # 3. versioned by DVC, pushed to a local remote; logged to MLflow; a selector registered after
    dvc(proj, "init", "--no-scm")
    dvc(proj, "add", "data/feedback/feedback.jsonl", "data/datasets/train.jsonl", "data/datasets/pairs.jsonl")
    dvc(proj, "remote", "add", "-d", "local", str(tmp_path / "remote"))
    dvc(proj, "push")
    mlflow = use_mlflow()
    with mlflow.start_run():
        mlflow.log_artifact("data/datasets/train.jsonl")
    version = client.create_model_version(SELECTOR_MODEL, source="file:///tmp/selector").version

    p = tmp_path / "params.yaml"  # forget's places at their defaults, relative to the project: data/, .dvc/cache
    p.write_text(yaml.safe_dump({**yaml.safe_load(open(REPO / "params.yaml")), "staging": {"dir": str(st)}}))

    r = runner.invoke(app, ["forget", "--verify", MARKER, "--remote", "--params", str(p)])
    found = {line.split(":")[1].strip() for line in r.output.splitlines() if line.startswith("found:")}
    assert r.exit_code == 1 and {"database", "staging files", "DVC cache", "MLflow artifacts"} <= found
    assert any(f.startswith("DVC remote") for f in found) and "pipeline files data/feedback" in found

    (doc,) = conn.execute("SELECT id FROM documents WHERE source = 'webhook:shed'").fetchone()
    r = runner.invoke(app, ["forget", "--doc", str(doc), "--remote", "--json", "--params", str(p)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["selectors_marked"] == [f"{SELECTOR_MODEL}:{version}"]
    r = runner.invoke(app, ["forget", "--verify", MARKER, "--remote", "--params", str(p)])
    assert r.exit_code == 0, r.output
    assert conn.execute("SELECT count(*) FROM documents").fetchone() == (2,)
