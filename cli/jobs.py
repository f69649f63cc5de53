"""`pai job run STAGE`: one DVC stage in the train container, with the repository, data/, the model cache
and the database mounted or reachable, its logs streamed here. Two engines: Docker runs the compose
file's job service (containers/compose.yaml, which starts postgres and mlflow first); podman (a box
without a Docker engine, containers/podman-setup.sh) runs the image built by containers/build.sh
directly, on the host's network, against the host's DATABASE_URL. Registered onto the one `pai` app by
cli/main.py."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import psycopg
import typer
import yaml
from psycopg.conninfo import conninfo_to_dict

from .terminal import _fail, console

COMPOSE_FILE = Path("containers/compose.yaml")
PROFILE = "train"  # the compose profile holding the job services
GPU_SERVICE, CPU_SERVICE = "train", "train-cpu"  # the same image, with and without the GPU reservation
ENGINES = ("docker", "podman")
# podman: the images containers/build.sh tags (the compose services' images), and what the job reaches
IMAGES = {True: "pai-brain/train:local", False: "pai-brain/train-cpu:local"}
PASSED_ENV = ("DATABASE_URL", "MLFLOW_TRACKING_URI", "OLLAMA_HOST")  # by name: values stay out of argv
VOLUMES = {  # named volumes, as compose's: the base model, pip's cache, llama.cpp's converter
    "pai-hf-cache": "/home/pai/.cache/huggingface",
    "pai-pip-cache": "/home/pai/.cache/pip",
    "pai-home": "/home/pai/.pai",
}
DVC_STORE = "/pai-dvc-store"  # .dvc/config's remote `local` (../../pai-dvc-store) as seen from /repo/.dvc

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


def git_common_dir(repo: Path) -> Path | None:
    """A git worktree's `.git` is a file naming a folder of the main checkout's `.git`: DVC in the container
    needs that folder at the same path. None for a plain checkout (its `.git` comes with the repository)."""
    dot_git = repo / ".git"
    if not dot_git.is_file():
        return None
    gitdir = Path(dot_git.read_text().removeprefix("gitdir:").strip())
    common = gitdir / "commondir"
    return (gitdir / common.read_text().strip()).resolve() if common.is_file() else gitdir.resolve()


def dvc_store(repo: Path, environ) -> Path:
    """The DVC remote's folder on the host: PAI_DVC_STORE, else ../pai-dvc-store (as compose.yaml)."""
    return Path(environ.get("PAI_DVC_STORE") or repo / ".." / "pai-dvc-store").resolve()


def podman_command(stage: str, gpu: bool, repo: Path, environ: dict[str, str], rootful: bool) -> list[str]:
    """`podman run` of the job image: the repository at /repo, the DVC store, the caches as named volumes,
    the host's network (so a DATABASE_URL naming localhost means the host), a socket folder of a
    DATABASE_URL mounted at the same path, and the files it writes owned by the caller."""
    store = dvc_store(repo, environ)
    cmd = ["podman", "run", "--rm", "--network=host", "--shm-size=8g"]
    cmd += ["--user=0:0"] if rootful else ["--userns=keep-id"]  # host root is root; a user stays that user
    cmd += ["-v", f"{repo}:/repo", "-v", f"{store}:{DVC_STORE}"]
    cmd += [a for name, target in VOLUMES.items() for a in ("-v", f"{name}:{target}")]
    if (common := git_common_dir(repo)) is not None:
        cmd += ["-v", f"{common}:{common}"]
    host = conninfo_to_dict(environ["DATABASE_URL"]).get("host") or ""
    cmd += [a for h in host.split(",") if h.startswith("/") for a in ("-v", f"{h}:{h}")]
    cmd += [a for name in PASSED_ENV if environ.get(name) for a in ("-e", name)]
    if gpu:
        cmd += ["--device=nvidia.com/gpu=all"]  # CDI: `nvidia-ctk cdi generate` on the GPU box
    return [*cmd, IMAGES[gpu], stage]


def docker_answers() -> bool:
    """A docker CLI is not an engine: true only when its daemon answers."""
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pick_engine(asked: str | None) -> str:
    """The engine asked for (--engine or PAI_ENGINE); else docker whose daemon answers, else podman."""
    asked = asked or os.environ.get("PAI_ENGINE") or None
    if asked is not None and asked not in ENGINES:
        _fail(f"unknown engine {asked!r} (docker or podman)")
    if asked is not None:
        return asked
    if shutil.which("docker") and docker_answers():
        return "docker"
    return "podman" if shutil.which("podman") else "docker"


def engine_command(engine: str, stage: str, gpu: bool, compose_file: Path) -> list[str]:
    if engine == "docker":
        if not compose_file.is_file():
            _fail(f"{compose_file}: no such compose file")
        return job_command(stage, gpu, compose_file)
    if not os.environ.get("DATABASE_URL"):
        _fail(
            "podman runs the job without compose's postgres: set DATABASE_URL to the database the service "
            "writes (docs/gpu-box.md 'Without Docker')"
        )
    try:
        return podman_command(stage, gpu, Path.cwd().resolve(), dict(os.environ), os.geteuid() == 0)
    except psycopg.ProgrammingError as e:  # conninfo_to_dict: a URL it cannot parse
        _fail(f"DATABASE_URL: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")


def check_engine(engine: str, gpu: bool) -> None:
    if shutil.which(engine) is None:
        _fail(
            f"{engine} not found on PATH: install Docker Engine with the Compose plugin (and the NVIDIA "
            "Container Toolkit for --gpu), or podman (bash containers/podman-setup.sh); docs/gpu-box.md"
        )
    if engine == "podman":
        image = IMAGES[gpu]
        if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
            build = "PAI_TRAIN_PROFILE=gpu bash containers/build.sh train" if gpu else "bash containers/build.sh train"
            _fail(f"podman: no image {image}: build it first ({build})")


def dvc_stages(dvc_yaml: Path) -> list[str]:
    return list((yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {}))


@job_app.command("run")
def run(
    stage: Annotated[str, typer.Argument(help="a stage of dvc.yaml (dvc repro runs what it depends on too)")],
    gpu: Annotated[
        bool, typer.Option("--gpu/--no-gpu", help="reserve the GPU (service train) or not (train-cpu)")
    ] = True,
    compose_file: Annotated[Path, typer.Option(help="the compose file with the job services")] = COMPOSE_FILE,
    engine: Annotated[
        Optional[str],
        typer.Option(help="docker or podman (default: PAI_ENGINE, else docker when its daemon answers, else podman)"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the container command, run nothing")] = False,
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
    chosen = pick_engine(engine)
    cmd = engine_command(chosen, stage, gpu, compose_file)
    if dry_run:
        print(json.dumps({"stage": stage, "command": cmd, "returncode": None}) if as_json else shlex.join(cmd))
        return
    check_engine(chosen, gpu)
    if chosen == "podman":  # podman refuses a missing bind source (Docker would create it, as root)
        dvc_store(Path.cwd().resolve(), os.environ).mkdir(parents=True, exist_ok=True)
    console.print(f"running: {shlex.join(cmd)}", soft_wrap=True)
    # stdio inherited: the stage's logs stream as they come (to stderr with --json, so stdout stays one JSON object)
    code = subprocess.run(cmd, check=False, stdout=sys.stderr if as_json else None).returncode
    if as_json:
        print(json.dumps({"stage": stage, "command": cmd, "returncode": code}))
    raise typer.Exit(code)
