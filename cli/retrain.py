"""`pai retrain`: one retrain cycle on the user's own store, from its feedback log alone: `dvc repro` (pull ->
train_ranker -> evaluate -> deploy, then the LLM's chain) in the project, this environment's python on PATH.
Where no judged split speaks for the store, deploy puts a challenger that passes the label-free checks on
trial (interleaved with the champion on the user's traffic, `pai status` follows it) instead of promoting it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from eval.promotion import RegistryError, record_trials
from retrieval.db import DatabaseError, connect

from .cycle import dvc_repro
from .terminal import _fail, console

PROJECT = Path(__file__).resolve().parents[1]  # the folder holding dvc.yaml and params.yaml
# queries whose answer cited something shown: below this the ranker's train, calibration and held-out bands
# are too thin to fit or to judge (train_ranker holds out 15 % of them)
MIN_CITED_QUERIES = 30


def cited_queries(conn) -> int:
    (n,) = conn.execute(
        "SELECT count(DISTINCT query_id) FROM query_candidates WHERE used AND shown IS NOT false"
    ).fetchone()
    return int(n)


def retrain(
    ranker_only: Annotated[
        bool, typer.Option(help="the ranker's chain only (dvc repro deploy): no LLM fine-tune")
    ] = False,
) -> None:
    """Retrain on your store's feedback log: dvc repro; a challenger that passes the checks goes on trial."""
    try:
        with connect() as conn:
            cited = cited_queries(conn)
        for line in record_trials():
            console.print(line, soft_wrap=True)
    except (DatabaseError, RegistryError) as e:
        _fail(str(e))
    if not (PROJECT / "dvc.yaml").exists():
        _fail(f"retrain: no dvc.yaml in {PROJECT}: pai retrain runs the pipeline of a checkout (pip install -e)")
    if cited < MIN_CITED_QUERIES:
        _fail(
            f"retrain: the feedback log has {cited} queries whose answer cited a shown chunk; "
            f"{MIN_CITED_QUERIES - cited} more are needed (post answers citing [n] to /feedback, or the MCP feedback tool)"
        )
    os.chdir(PROJECT)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar:
        try:
            dvc_repro(bar, ("deploy",) if ranker_only else ())
        except RuntimeError as e:
            _fail(str(e).splitlines()[0] + " (the stage's log is above)")
    out = json.loads((PROJECT / "metrics" / "deploy.json").read_text())
    if out.get("waiting_for"):
        t = out["waiting_for"]
        console.print(f"retrain: {out['version']} waits: trial {t['id']} is still running (`pai status`)")
    elif out.get("trial"):
        console.print(f"retrain: {out['version']} is on trial {out['trial']['id']}; `pai status` follows it")
    elif out.get("alias") == "champion":
        console.print(f"retrain: {out['version']} is the champion")
    else:
        console.print(
            f"retrain: no promotion, no trial: {'; '.join(out.get('reasons') or []) or 'see metrics/deploy.json'}"
        )
