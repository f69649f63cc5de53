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

    r = runner.invoke(app, ["promote", "similarity", "--wait", "0", "--reason", "back to basics"])
    assert r.exit_code == 0, r.output
    assert "promoted similarity (deployment 1); no service is running: it loads it at start" in r.output
    status = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert (status["champion"], status["champion_history"], status["services_listening"]) == (
        "similarity (none promoted)",
        ["similarity"],
        0,
    )
    assert [(d["id"], d["version"], d["action"], d["reason"]) for d in status["deployments"]] == [
        (1, "similarity", "promote", "back to basics")
    ]
    r = runner.invoke(app, ["status"])
    assert r.exit_code == 0 and "champion: similarity (none promoted)" in r.output and "deployments" in r.output
