"""`pai job run STAGE`: the docker compose command and the podman command it runs, its dry run for every DVC
stage, the engine it picks, one-line errors, and the stage's exit status passed back (a stand-in `docker` on
PATH; no Docker engine needed). The podman job run for real: tests/containers/test_images.py (slow)."""

from __future__ import annotations

import json
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
        r = runner.invoke(app, ["job", "run", stage, "--no-gpu", "--dry-run", "--engine", "docker"])
        assert r.exit_code == 0, r.output
        assert (
            r.stdout.strip() == f"docker compose -f containers/compose.yaml --profile train run --rm train-cpu {stage}"
        )
    r = runner.invoke(app, ["job", "run", "nope", "--dry-run"])
    assert r.exit_code == 2 and "unknown stage 'nope'" in r.output
    r = runner.invoke(app, ["job", "run", "train", "--dry-run", "--engine", "dockr"])
    assert r.exit_code == 2 and "unknown engine 'dockr'" in r.output
    monkeypatch.setattr(cli_jobs.shutil, "which", lambda _: None)
    for engine in cli_jobs.ENGINES:
        r = runner.invoke(app, ["job", "run", "train", "--engine", engine], env={"DATABASE_URL": "postgresql:///x"})
        assert r.exit_code == 2 and f"{engine} not found on PATH" in r.output


def test_job_run_streams_the_stage_and_returns_its_status(monkeypatch, tmp_path):
    """A stand-in `docker` on PATH: the command reaches it verbatim and its exit status comes back."""
    from cli.main import app

    fake = tmp_path / "docker"
    # `docker info` answers (a daemon is there), so docker is picked though podman may be installed
    fake.write_text(f'#!/bin/sh\n[ "$1" = info ] && exit 0\necho "docker $*" > {tmp_path}/args\nexit 3\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PAI_ENGINE", raising=False)
    monkeypatch.chdir(REPO)
    r = runner.invoke(app, ["job", "run", "build"])
    assert r.exit_code == 3, r.output
    assert (tmp_path / "args").read_text().split() == cli_jobs.job_command("build")


def test_podman_command_mounts_the_repository_store_caches_and_a_socket_folder(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"DATABASE_URL": "host=/run/pg,/tmp/other port=5432 user=me password=s3cret", "OLLAMA_HOST": ""}
    cmd = cli_jobs.podman_command("pull", False, repo, env, rootful=True)
    text = shlex.join(cmd)
    assert cmd[:4] == ["podman", "run", "--rm", "--network=host"] and cmd[-2:] == ["pai-brain/train-cpu:local", "pull"]
    assert "--user=0:0" in cmd and "--device=nvidia.com/gpu=all" not in cmd
    assert f"{repo}:/repo" in cmd and f"{tmp_path / 'pai-dvc-store'}:/pai-dvc-store" in cmd
    assert {"pai-hf-cache:/home/pai/.cache/huggingface", "pai-home:/home/pai/.pai"} <= set(cmd)
    assert "/run/pg:/run/pg" in cmd and "/tmp/other:/tmp/other" in cmd  # the socket folders, at the same path
    assert cmd[cmd.index("-e") + 1] == "DATABASE_URL" and "OLLAMA_HOST" not in cmd  # an empty variable is not passed
    assert "s3cret" not in text  # passed by name: the password never reaches argv or the printed command
    gpu = cli_jobs.podman_command("train", True, repo, {"DATABASE_URL": "postgresql://u@localhost/db"}, rootful=False)
    assert "--userns=keep-id" in gpu and "--device=nvidia.com/gpu=all" in gpu and gpu[-2] == "pai-brain/train:local"
    assert not any(a.startswith("localhost") for a in gpu)  # a TCP host mounts nothing


def test_podman_command_in_a_git_worktree_mounts_the_main_checkouts_git_folder(tmp_path):
    main, wt = tmp_path / "main", tmp_path / "wt"
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (main / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    cmd = cli_jobs.podman_command("pull", False, wt, {"DATABASE_URL": "postgresql:///x"}, rootful=True)
    assert f"{main / '.git'}:{main / '.git'}" in cmd
    assert cli_jobs.git_common_dir(main) is None  # a plain checkout: .git comes with the repository


def test_podman_job_needs_a_database_url_and_a_built_image(monkeypatch, tmp_path):
    """podman has no compose postgres: without DATABASE_URL, or with one it cannot parse, or without the image,
    one line that says what to do."""
    from cli.main import app

    monkeypatch.chdir(REPO)
    for url, said in (
        (None, "set DATABASE_URL"),
        ("", "set DATABASE_URL"),
        ("host=/x port", "DATABASE_URL: missing"),
        ("host='/x", "DATABASE_URL: unterminated quoted string"),
    ):
        env = {"DATABASE_URL": url}
        r = runner.invoke(app, ["job", "run", "pull", "--no-gpu", "--engine", "podman", "--dry-run"], env=env)
        assert r.exit_code == 2 and said in r.output and "Traceback" not in r.output, (url, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output
    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\necho "podman $*" >> {tmp_path}/args\n[ "$1" = image ] && exit 1\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    env = {"DATABASE_URL": "postgresql://u@localhost/db", "PAI_DVC_STORE": str(tmp_path / "store")}
    r = runner.invoke(app, ["job", "run", "pull", "--no-gpu", "--engine", "podman"], env=env)
    assert r.exit_code == 2 and "no image pai-brain/train-cpu:local" in r.output
    assert "containers/build.sh train" in r.output
    assert (tmp_path / "args").read_text().split() == ["podman", "image", "exists", "pai-brain/train-cpu:local"]


def test_podman_job_runs_and_returns_the_stages_status(monkeypatch, tmp_path):
    from cli.main import app

    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\n[ "$1" = image ] && exit 0\necho "podman $*" > {tmp_path}/args\nexit 4\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(REPO)
    env = {
        "DATABASE_URL": "postgresql://u@localhost/db",
        "PAI_DVC_STORE": str(tmp_path / "store"),
        "PAI_ENGINE": "podman",
    }
    r = runner.invoke(app, ["job", "run", "pull", "--no-gpu", "--dry-run", "--json"], env=env)
    dry = json.loads(r.stdout)
    assert dry["command"][0] == "podman" and dry["returncode"] is None
    r = runner.invoke(app, ["job", "run", "pull", "--no-gpu"], env=env)
    assert r.exit_code == 4, r.output
    assert (tmp_path / "store").is_dir()  # created, as podman refuses a missing bind source
    assert (tmp_path / "args").read_text().split() == dry["command"]
