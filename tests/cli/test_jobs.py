"""`pai job run STAGE`: the docker compose command it runs, its dry run for every DVC stage, one-line errors, and
the stage's exit status passed back (a stand-in `docker` on PATH; no Docker engine needed)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from cli import jobs as cli_jobs

REPO = Path(__file__).resolve().parents[2]
CONTAINERS = REPO / "containers"


def compose() -> dict:
    return yaml.safe_load((CONTAINERS / "compose.yaml").read_text())  # YAML merge keys (<<) resolved


runner = CliRunner()


def test_job_command():
    assert (
        shlex.join(cli_jobs.job_command("train"))
        == "docker compose -f containers/compose.yaml --profile train run --rm train train"
    )
    assert shlex.join(cli_jobs.job_command("pull", gpu=False, compose_file=Path("my compose.yaml"))) == (
        "docker compose -f 'my compose.yaml' --profile train run --rm train-cpu pull"
    )
    services = compose()["services"]
    assert cli_jobs.COMPOSE_FILE == (CONTAINERS / "compose.yaml").relative_to(REPO)
    for name in (cli_jobs.GPU_SERVICE, cli_jobs.CPU_SERVICE):
        assert cli_jobs.PROFILE in services[name]["profiles"]


def test_job_run_dry_run_every_stage_and_one_line_errors(monkeypatch):
    from cli.main import app

    monkeypatch.chdir(REPO)
    for stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]:
        r = runner.invoke(app, ["job", "run", stage, "--no-gpu", "--dry-run"])
        assert r.exit_code == 0, r.output
        assert (
            r.stdout.strip() == f"docker compose -f containers/compose.yaml --profile train run --rm train-cpu {stage}"
        )
    r = runner.invoke(app, ["job", "run", "nope", "--dry-run"])
    assert r.exit_code == 2 and "unknown stage 'nope'" in r.output
    monkeypatch.setattr(cli_jobs.shutil, "which", lambda _: None)
    r = runner.invoke(app, ["job", "run", "train"])
    assert r.exit_code == 2 and "docker not found on PATH" in r.output


def test_job_run_streams_the_stage_and_returns_its_status(monkeypatch, tmp_path):
    """A stand-in `docker` on PATH: the command reaches it verbatim and its exit status comes back."""
    from cli.main import app

    fake = tmp_path / "docker"
    fake.write_text(f'#!/bin/sh\necho "docker $*" > {tmp_path}/args\nexit 3\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(REPO)
    r = runner.invoke(app, ["job", "run", "build"])
    assert r.exit_code == 3, r.output
    assert (tmp_path / "args").read_text().split() == cli_jobs.job_command("build")
