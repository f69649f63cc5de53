"""MLflow: where runs go (a local sqlite store by default, `MLFLOW_TRACKING_URI` when set), and the
facts every run records (dataset hash, git commit)."""

from __future__ import annotations

import os
import subprocess

from .db import pai_home

EXPERIMENT = "pai-selector"
SELECTOR_MODEL = "pai-selector"  # the registered model of selector versions (eval/registry.py registers them)


def use_mlflow():
    """The mlflow module, pointed at the project's tracking store and experiment."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        home = pai_home().resolve()
        home.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{home / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    if mlflow.get_experiment_by_name(EXPERIMENT) is None:
        # a tracking server keeps its own artifacts; a local store keeps them under $PAI_HOME
        location = None if uri.startswith(("http://", "https://")) else (pai_home().resolve() / "mlartifacts").as_uri()
        mlflow.create_experiment(EXPERIMENT, artifact_location=location)
    mlflow.set_experiment(EXPERIMENT)
    return mlflow


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
