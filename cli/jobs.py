"""`pai job run STAGE`: one DVC stage in the train container (containers/compose.yaml), with the
repository, data/, the model cache and the MLflow URI mounted, its logs streamed here. Registered
onto the one `pai` app by cli/main.py."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from .terminal import _fail, console

COMPOSE_FILE = Path("containers/compose.yaml")
PROFILE = "train"  # the compose profile holding the job services
GPU_SERVICE, CPU_SERVICE = "train", "train-cpu"  # the same image, with and without the GPU reservation

job_app = typer.Typer(no_args_is_help=True, help="Pipeline stages in containers (a GPU box).")


def job_command(stage: str, gpu: bool = True, compose_file: Path = COMPOSE_FILE) -> list[str]:
    """The docker command that runs `dvc repro STAGE` in a fresh job container (the image's
    entrypoint is `dvc repro`; compose starts postgres and mlflow first and waits for them)."""
    return [
        "docker",
        "compose",
        "-f",
        str(compose_file),
        "--profile",
        PROFILE,
        "run",
        "--rm",
        GPU_SERVICE if gpu else CPU_SERVICE,
        stage,
    ]


def dvc_stages(dvc_yaml: Path) -> list[str]:
    return list((yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {}))


@job_app.command("run")
def run(
    stage: Annotated[str, typer.Argument(help="a stage of dvc.yaml (dvc repro runs what it depends on too)")],
    gpu: Annotated[
        bool, typer.Option("--gpu/--no-gpu", help="reserve the GPU (service train) or not (train-cpu)")
    ] = True,
    compose_file: Annotated[Path, typer.Option(help="the compose file with the job services")] = COMPOSE_FILE,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the docker command, run nothing")] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="print {stage, command, returncode} as JSON on stdout (the stage's logs go to stderr)"
        ),
    ] = False,
) -> None:
    """Run one pipeline stage in the train container and stream its logs; exits with its status."""
    if not Path("dvc.yaml").is_file():
        _fail("dvc.yaml not found: run `pai job run` from the repository root")
    stages = dvc_stages(Path("dvc.yaml"))
    if stage not in stages:
        _fail(f"unknown stage {stage!r} (dvc.yaml has: {', '.join(stages)})")
    if not compose_file.is_file():
        _fail(f"{compose_file}: no such compose file")
    cmd = job_command(stage, gpu, compose_file)
    if dry_run:
        print(json.dumps({"stage": stage, "command": cmd, "returncode": None}) if as_json else shlex.join(cmd))
        return
    if shutil.which("docker") is None:
        _fail(
            "docker not found on PATH: install Docker Engine with the Compose plugin (and the NVIDIA "
            "Container Toolkit for --gpu); README 'Run on your GPU box'"
        )
    console.print(f"running: {shlex.join(cmd)}", soft_wrap=True)
    # stdio inherited: the stage's logs stream as they come (to stderr with --json, so stdout stays one JSON object)
    code = subprocess.run(cmd, check=False, stdout=sys.stderr if as_json else None).returncode
    if as_json:
        print(json.dumps({"stage": stage, "command": cmd, "returncode": code}))
    raise typer.Exit(code)
