"""The DVC pipeline as the commands run it: `dvc repro` with this environment's python, each stage's line shown as
it runs, and where each stage writes its metrics. `pai retrain` runs it on the user's store; the lab's `pai lab cycle`
(cli/lab/cycle.py) runs it on SciFact."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import yaml

from eval.evaluate import EvaluateParams
from eval.gate import DeployParams
from eval.systems import chain_file
from retrieval.params import load_section
from training.build import BuildParams
from training.export import ExportParams
from training.pull import PullParams
from training.train import TrainParams

from .terminal import LOG_WIDTH


def stage_metrics(params: Path) -> dict[str, Path]:
    """Each stage's metrics file, in the folder params.yaml gives the stage (every path declared once there)."""
    evaluated = Path(load_section(params, "evaluate", EvaluateParams).out) / "eval.json"
    deployed = Path(load_section(params, "deploy", DeployParams).metrics) / "deploy.json"
    return {
        "feedback": Path(load_section(params, "pull", PullParams).out) / "metrics.json",
        "dataset": Path(load_section(params, "build", BuildParams).out) / "stats.json",
        "train": Path(load_section(params, "train", TrainParams).out) / "metrics.json",
        "export": Path(load_section(params, "export", ExportParams).out) / "metrics.json",
        "eval": evaluated,  # the ranker's chain
        "deploy": deployed,
        "eval_llm": chain_file(evaluated, "llm"),  # the LLM's chain
        "deploy_llm": chain_file(deployed, "llm"),
    }


def dvc_repro(bar, targets: tuple[str, ...] = ()) -> dict[str, float]:
    """`dvc repro [targets]`, its stages' `python` being this environment's (the README runs `.venv/bin/pai` with
    no venv activated), each stage's start and summary line shown as it runs; the wall seconds of each stage that
    ran (from its start to the next one's, or to the end)."""
    env = os.environ | {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "COLUMNS": str(LOG_WIDTH),
    }  # the stages' rich consoles write into a pipe: whole lines, not 80 columns
    stages = "|".join(
        map(re.escape, yaml.safe_load(Path("dvc.yaml").read_text())["stages"])
    )  # each prints "STAGE: summary"
    stage_line = re.compile(rf"^(?:Running stage '([^']+)'|(?:{stages}): )")
    task = bar.add_task("3. dvc repro", total=None)
    tail: deque[str] = deque(maxlen=80)
    seconds: dict[str, float] = {}
    running, started = None, time.monotonic()
    with subprocess.Popen(
        [str(Path(sys.executable).with_name("dvc")), "repro", *targets],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as proc:
        for line in proc.stdout:
            tail.append(line)
            if m := stage_line.match(line):
                if m[1]:
                    if running:
                        seconds[running] = round(time.monotonic() - started, 1)
                    running, started = m[1], time.monotonic()
                    bar.update(task, description=f"3. dvc repro: {m[1]}")
                bar.console.print(f"   {line.rstrip()}", highlight=False, soft_wrap=True)
    if proc.returncode != 0:
        raise RuntimeError("dvc repro failed:\n" + "".join(tail)[-3000:])
    if running:
        seconds[running] = round(time.monotonic() - started, 1)
    bar.update(task, total=1, completed=1, description="3. dvc repro")
    return seconds
