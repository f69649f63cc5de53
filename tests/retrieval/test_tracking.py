"""MLflow for the pipeline's runs (retrieval/tracking.py): a local sqlite store under $PAI_HOME unless
MLFLOW_TRACKING_URI says otherwise, the project's experiment created there once, and the git commit recorded."""

import re

from retrieval.tracking import EXPERIMENT, git_commit, use_mlflow


def test_runs_go_to_a_sqlite_store_under_pai_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("PAI_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    mlflow = use_mlflow()
    assert mlflow.get_tracking_uri() == f"sqlite:///{home.resolve() / 'mlflow.db'}" and (home / "mlflow.db").exists()
    exp = mlflow.get_experiment_by_name(EXPERIMENT)
    assert exp.artifact_location == (home.resolve() / "mlartifacts").as_uri()
    assert use_mlflow().get_experiment_by_name(EXPERIMENT).experiment_id == exp.experiment_id  # created once
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    assert use_mlflow().get_tracking_uri() == f"sqlite:///{tmp_path / 'elsewhere.db'}"


def test_git_commit_is_the_checkouts_head_or_none_outside_one(tmp_path, monkeypatch):
    assert re.fullmatch(r"[0-9a-f]{40}", git_commit() or "")
    monkeypatch.chdir(tmp_path)
    assert git_commit() is None
