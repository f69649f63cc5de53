"""`pai promote`, `pai rollback` and `pai status` on an empty registry (a real MLflow sqlite store, a real
Postgres): each says what changed, or one line why not. Moves between real versions with a running service:
tests/eval/test_promotion.py."""

import json

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def test_moves_on_an_empty_registry_say_what_changed_or_why_not(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))  # an empty registry of its own
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    r = runner.invoke(app, ["rollback"])
    assert r.exit_code == 2 and "nothing to roll back: no champion has been promoted" in r.output
    r = runner.invoke(app, ["promote", "7"])
    assert r.exit_code == 2 and "no selector version '7' in the registry (known: none)" in r.output
    assert "Traceback" not in r.output

    r = runner.invoke(app, ["promote", "first-stage", "--wait", "0", "--reason", "back to basics"])
    assert r.exit_code == 0, r.output
    assert "promoted first-stage (deployment 1); no service is running: it loads it at start" in r.output
    status = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert (status["champion"], status["champion_history"], status["services_listening"]) == (
        "first-stage (none promoted)",
        ["first-stage"],
        0,
    )
    assert [(d["id"], d["version"], d["action"], d["reason"]) for d in status["deployments"]] == [
        (1, "first-stage", "promote", "back to basics")
    ]
    r = runner.invoke(app, ["status"])
    assert r.exit_code == 0 and "champion: first-stage (none promoted)" in r.output and "deployments" in r.output


def test_the_old_word_promotes_with_one_line_and_old_records_read_as_named_now(db_url, tmp_path, monkeypatch):
    """`pai promote similarity` (the first-stage order's name before issue 59) still works for one release, saying
    the new word on stderr; rows and tags stored under the old name (a deployment, a trial, the champion history,
    a query served by it) read as `first-stage`."""
    from eval.registry import MODEL, client
    from retrieval.contracts.interleaving import TrialParams
    from retrieval.db import connect
    from retrieval.logs import deployments, feedback, query_view, trials

    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    r = runner.invoke(app, ["promote", "similarity", "--wait", "0"])
    assert r.exit_code == 0, r.output
    said = r.stderr.splitlines()
    assert said[0] == "pai promote similarity is deprecated: say pai promote first-stage"
    assert sum("deprecated" in line for line in said) == 1 and "promoted first-stage (deployment 1)" in r.output

    old = {"kind": "similarity", "version": "similarity"}  # as stored before the rename
    client().set_registered_model_tag(MODEL, "champion_history", json.dumps(["similarity"]))
    with connect(db_url) as conn:
        deployments.announce(conn, old, "promote", "stored by an older pai")
        trial = trials.start(conn, old, {"kind": "ranker", "version": "ranker:1", "model_dir": "m"}, TrialParams())
        qid = feedback.log_query(conn, "an old question", [], "similarity")
        assert conn.execute("SELECT version, record FROM selector_deployments WHERE id = 2").fetchone() == (
            "similarity",
            old,
        )  # the rows hold the old spelling
        latest = deployments.latest(conn)
        assert (latest.version, latest.record) == ("first-stage", {"kind": "first-stage", "version": "first-stage"})
        running = trials.get(conn, trial.id)
        assert (running.champion, running.champion_record["kind"]) == ("first-stage", "first-stage")
        assert query_view.query_view(conn, qid, None).selector_version == "first-stage"
        assert [r[4] for r in query_view.recent(conn, None)] == ["first-stage"]
    status = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert status["champion_history"] == ["first-stage"]
    assert [d["version"] for d in status["deployments"]] == ["first-stage", "first-stage"]
    r = runner.invoke(app, ["rollback", "--wait", "0"])  # back from the only champion: the first-stage order
    assert r.exit_code == 0 and "rolled back to first-stage" in r.output, r.output
