"""`pai retrain` and `pai eval`.

`pai retrain`: one retrain cycle on the user's own store, from its feedback log alone: `dvc repro` (pull ->
train_ranker -> evaluate -> deploy, then the LLM's chain) in the project, this environment's python on PATH.
Where no judged split speaks for the store, deploy puts a challenger that passes the label-free checks on
trial (interleaved with the champion on the user's traffic, `pai status` follows it) instead of promoting it.

`pai eval`: selectors on a benchmark file, side by side (eval/evaluate.py).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from eval import registry
from eval.evaluate import EvaluateParams, evaluate, load_champion
from eval.evaluate import print_table as print_eval_table
from eval.promotion import record_trials
from eval.registry import RegistryError
from eval.systems import BASELINES, OLD_NAMES
from retrieval.db import DatabaseError, connect
from retrieval.embed import get_embedder
from retrieval.fusion import GeneralRule
from retrieval.ops import forget_marks
from retrieval.params import ParamsError, SearchParams, UsedParams, load_section
from serving.interface import SelectorLoadError
from serving.selectors import resolve
from training.build import BuildParams

from . import workspace
from .forget import forgotten_line
from .repro import dvc_repro, stage_metrics
from .terminal import RETRAIN, ParamsOpt, _fail, console, emit, progress_bar
from .workspace import WorkspaceError

app = typer.Typer()

PROJECT = workspace.CHECKOUT  # the folder holding dvc.yaml and params.yaml
# queries whose answer cited something shown: below this the ranker's train, calibration and held-out bands
# are too thin to fit or to judge (train_ranker holds out 15 % of them)
MIN_CITED_QUERIES = 30


def cited_queries(conn) -> int:
    (n,) = conn.execute(
        "SELECT count(DISTINCT query_id) FROM query_candidates WHERE used AND shown IS NOT false"
    ).fetchone()
    return int(n)


@app.command(
    "retrain", rich_help_panel=RETRAIN, short_help="Retrain on your store's feedback; a challenger goes on trial."
)
def retrain(
    ranker_only: Annotated[
        bool, typer.Option(help="the ranker's chain only (dvc repro deploy): no LLM fine-tune")
    ] = False,
) -> None:
    """Retrain on your store's feedback log: dvc repro; a challenger that passes the checks goes on trial."""
    try:
        with connect() as conn:
            cited, me = cited_queries(conn), workspace.identity(conn)
        for line in record_trials():
            console.print(line, soft_wrap=True)
        champ = registry.champion()
        if line := forgotten_line(forget_marks.marked(), champ["version"] if champ else None):
            console.print(f"retrain: {line}", soft_wrap=True)
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
    try:
        deployed = stage_metrics(Path("params.yaml"))["deploy"]  # the deploy stage's report, where params.yaml puts it
    except ParamsError as e:
        _fail(str(e))
    try:  # the checkout holds this store's outputs (another's parked) until deploy's report is read
        with (
            workspace.held(PROJECT, me, lambda s: console.print(s, soft_wrap=True, markup=False)),
            Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar,
        ):
            try:
                dvc_repro(bar, ("deploy",) if ranker_only else ())
            except RuntimeError as e:
                _fail(str(e).splitlines()[0] + " (the stage's log is above)")
            out = json.loads(deployed.read_text())
    except WorkspaceError as e:
        _fail(str(e))
    if out.get("waiting_for"):
        t = out["waiting_for"]
        console.print(f"retrain: {out['version']} waits: trial {t['id']} is still running (`pai status`)")
    elif out.get("trial"):
        console.print(f"retrain: {out['version']} is on trial {out['trial']['id']}; `pai status` follows it")
    elif out.get("alias") == "champion":
        console.print(f"retrain: {out['version']} is the champion")
    else:
        console.print(f"retrain: no promotion, no trial: {'; '.join(out.get('reasons') or []) or f'see {deployed}'}")


@app.command("eval", rich_help_panel=RETRAIN, short_help="Evaluate selectors on a benchmark file, side by side.")
def eval_command(
    benchmark: Annotated[Path, typer.Option(help="a benchmark file in the contract-5 format")],
    selector: Annotated[
        str,
        typer.Option(
            help=f"all, {', '.join(BASELINES)} (the baselines), selector (--model), champion, a registry version "
            "(7, pai-selector:7), or a model path (models/ranker, models/export, a .gguf)"
        ),
    ] = "all",
    model: Annotated[
        Optional[Path],
        typer.Option(
            help="the 'selector' system: an export folder (run as served) or models/selector (transformers); "
            "default: params.yaml evaluate.model"
        ),
    ] = None,
    max_queries: Annotated[int, typer.Option(help="evaluate the first N queries (0 = all)")] = 100,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as one JSON object")] = False,
) -> None:
    """Evaluate selectors on a benchmark file: one table, all systems side by side."""

    if not benchmark.exists():
        _fail(f"{benchmark}: no such benchmark file")
    try:
        p = replace(
            load_section(params, "evaluate", EvaluateParams),
            benchmarks=str(benchmark),
            feedback="",
            max_queries=max_queries,
        )
        model = Path(p.model) if model is None else model
        systems = ("all", *BASELINES, "selector", "champion")
        if selector in OLD_NAMES:  # a baseline's name before issue 59, for one release
            print(f"pai eval --selector {selector} is deprecated: say {OLD_NAMES[selector]}", file=sys.stderr)
            selector = OLD_NAMES[selector]
        if selector not in systems:  # a path (a model folder, an export, a .gguf) or a registry version, as served
            sel = resolve(selector if Path(selector).exists() else registry.record_of(selector))
            selector = "selector"
        elif selector in ("all", "selector") and (
            (model / "selector.json").exists() or (model / "train_config.json").exists()
        ):
            sel = resolve(model)
        else:
            sel = None
        if selector == "selector" and sel is None:
            _fail(f"{model}: no exported or trained selector (run dvc repro)")
        champ = load_champion({}, console) if selector in ("all", "champion") else None
        if selector == "champion" and champ is None:
            _fail("no champion in the registry (pai promote VERSION)")
        search = load_section(params, "search", SearchParams)
        with progress_bar() as bar:
            result, _ = evaluate(
                p,
                get_embedder(),
                sel,
                lambda name, n: lambda t=bar.add_task(name, total=n): bar.advance(t),
                champ,
                floor=search.min_chunks,  # a pick topped up to the context's floor, as served
                val_fraction=load_section(params, "build", BuildParams).val_fraction,  # no feedback split read here
                used=load_section(params, "used", UsedParams),
                rule=GeneralRule.of(search),  # the general baseline: the first stage's order as params.yaml sets it
            )
    except (ParamsError, json.JSONDecodeError, KeyError, ValueError, RegistryError, SelectorLoadError) as e:
        _fail(f"{benchmark}: {e}")
    if selector != "all":
        for r in result.values():
            r["systems"] = {k: v for k, v in r["systems"].items() if k == selector}
            r["paired_bootstrap"] = {k: v for k, v in r["paired_bootstrap"].items() if k.startswith(selector + "_vs_")}
    emit(result, as_json, None, lambda c: print_eval_table(result, c))
