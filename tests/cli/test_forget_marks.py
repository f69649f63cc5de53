"""Selectors trained on forgotten data, in a real MLflow registry (a sqlite store under a tmp PAI_HOME): a version
registered before the forgotten memory was first logged is not marked, one registered after is; `pai status` lists
it and `pai retrain` says a retrain without it is due."""

import json
import time

from typer.testing import CliRunner

from cli.main import app
from retrieval.ops import forget_files, forget_marks
from retrieval.ops.forget import Target, forget
from retrieval.tracking import SELECTOR_MODEL, use_mlflow
from tests.forget_world import make_world

runner = CliRunner()


def register(client, n: int) -> str:
    mv = client.create_model_version(SELECTOR_MODEL, source=f"file:///tmp/selector-{n}")
    record = {"version": f"{SELECTOR_MODEL}:{mv.version}", "kind": "first-stage"}
    client.set_model_version_tag(SELECTOR_MODEL, mv.version, "record", json.dumps(record))
    return mv.version


def test_the_selector_trained_on_it_is_marked(conn, db_url, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert forget_marks.marked() == {} and not (tmp_path / "home" / "mlflow.db").exists()  # no registry: none made

    client = use_mlflow().MlflowClient()
    client.create_registered_model(SELECTOR_MODEL)
    before = register(client, 1)  # trained before the note existed
    time.sleep(0.05)
    w = make_world(conn, db_url, embedder, tmp_path)  # the note is served, cited, pulled, built
    time.sleep(0.05)
    after = register(client, 2)  # trained on the pull that held it
    client.set_registered_model_alias(SELECTOR_MODEL, "champion", after)

    report = forget(conn, Target(source="note:marker"), forget_files.places(w.fp, w.staging, home=w.home))
    assert report.selectors_marked == [f"{SELECTOR_MODEL}:{after}"]
    marks = forget_marks.marked()
    assert list(marks) == [f"{SELECTOR_MODEL}:{after}"] and f"{SELECTOR_MODEL}:{before}" not in marks
    assert client.get_model_version(SELECTOR_MODEL, after).tags[forget_marks.TAG] == marks[f"{SELECTOR_MODEL}:{after}"]

    r = runner.invoke(app, ["status", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["forgotten_data"] == marks
    r = runner.invoke(app, ["retrain"])  # too few cited queries to run: it says so after the forgotten line
    assert f"retrain: trained on data since forgotten: {SELECTOR_MODEL}:{after} (champion)" in r.output
    assert "a retrain without it is due" in r.output
    assert r.exit_code == 2 and "more are needed" in r.output  # and nothing ran: the log is too small
