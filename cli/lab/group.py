"""`pai lab`: the lab, apart from the product (the user's commands are the rest of cli/): the benchmarks and the
experiments beside the main job, one line each in `pai lab --help`. Each command is registered where its body is;
this group puts them together, in the order the help lists them:

- `cycle`: cli/lab/cycle.py, the demo (ingest SciFact, replay, dvc repro, measure)
- `simulate`, `grounding`, `notes`: cli/lab/lab_feedback.py, a feedback log from a benchmark (a stand-in for real
  consumers) and what reading the answers would change in one
- `trial`, `gpu-smoke`: here; the trial's power per domain (eval/bench/trial_power.py) and the train stage's GPU
  path on random weights (training/gpu_smoke.py)
- `teacher`: cli/lab/teacher.py, how good a teacher of all 20 candidates must be before its labels help
- `loop report`: here, retrains over slices of the log (cli/lab/loop.py; on-policy: cli/lab/onpolicy.py); `loop
  trial`: cli/lab/loop_trial.py, on-policy cycles per domain in which only the trial by interleaving promotes
- `bench`: the benchmarks proper (cli/lab/bench.py, cores in eval/bench/)

Flags mean the same in every command: `--json` prints JSON to stdout, `--out FILE` writes it to a file,
`--benchmark-dir` is the judged benchmark folder, `--max-queries` caps the queries."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from eval.bench import trial_power
from eval.code_bench import build as build_code_items
from eval.consumer import ReplayParams
from eval.evaluate import EvaluateParams
from eval.items import checked_items
from retrieval.contracts.interleaving import TrialParams
from retrieval.db import DatabaseError
from retrieval.embed import get_embedder
from retrieval.params import ParamsError, SearchParams, load_section
from training import gpu_smoke

from ..terminal import (
    LAB_BENCH,
    LAB_FEEDBACK,
    LAB_GPU,
    BenchDirOpt,
    JsonOpt,
    ParamsOpt,
    _fail,
    console,
    emit,
    judged_dir,
    progress_bar,
)
from . import bench, cycle, lab_feedback, loop_trial, onpolicy, teacher
from .loop import print_loop, run_loop, write_outputs

app = typer.Typer(
    no_args_is_help=True,
    help="The lab: the benchmarks, the demo cycle, simulated feedback, the loops, the GPU path.\n\n"
    "Experiments beside the main job; their figures are in docs/measurements.md, each with its command.",
)
loop_app = typer.Typer(
    no_args_is_help=True,
    help="Does the loop learn? Retrains over the log; trial-decided cycles.",
)
tools = typer.Typer()  # this module's commands of the group: `trial`, `gpu-smoke`


@tools.command("trial", rich_help_panel=LAB_FEEDBACK, short_help="Power of the trial by interleaving, per domain.")
def trial_command(
    domains: Annotated[str, typer.Option(help="hotpotqa, scifact, code, or contract-5 files, comma-separated")] = (
        "hotpotqa,scifact,code"
    ),
    seeds: Annotated[int, typer.Option(help="simulated trials per challenger")] = 20,
    champion: Annotated[
        str, typer.Option(help="the ranker serving as champion: hybrid (the first stage) or cosine")
    ] = ("hybrid"),
    max_queries: Annotated[int, typer.Option(help="items per domain (0 = all)")] = 0,
    merge: Annotated[
        str,
        typer.Option(
            help="the trial contexts to compare on the same items: agreed-first (served), team-draft (served before), union"
        ),
    ] = "agreed-first",
    previews: Annotated[
        Optional[int],
        typer.Option(
            help="preview lines the consumer reads after the context (default: search.previews, at most "
            "replay.previews_read; 0 = a consumer blind to previews); it expands them by replay's chances"
        ),
    ] = None,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: Annotated[Optional[Path], typer.Option(help="write the report as JSON here")] = None,
) -> None:
    """Power of the trial by interleaving: share of simulated trials that promote each challenger, against its
    judged Recall@5 gain over the champion (hybrid), per domain (eval/bench/trial_power.py)."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        rule = load_section(params, "trial", TrialParams)
        search, cp = load_section(params, "search", SearchParams), load_section(params, "replay", ReplayParams)
        if previews is not None and previews < 0:
            raise ParamsError("--previews: 0 or more")
        consumer = trial_power.Consumer.realistic(  # as `pai lab loop trial` reads it; --previews 0: blind to them
            search.previews if previews is None else previews,
            cp.previews_read if previews is None else previews,
            cp.expand_relevant,
            cp.expand_irrelevant,
        )
        merges = [m for m in merge.split(",") if m]
        if not merges or any(m not in trial_power.MERGES for m in merges):
            raise ParamsError(f"--merge: one or more of {', '.join(trial_power.MERGES)}, comma-separated")
    except ParamsError as e:
        _fail(str(e))
    embedder, report = get_embedder(), {"rule": rule.__dict__, "domains": {}}
    for name in [d for d in domains.split(",") if d]:
        if name == "hotpotqa":
            items = checked_items(benchmark_dir / "hotpotqa" / "test.jsonl")
        elif name == "scifact":
            items = trial_power.scifact_items(benchmark_dir, embedder)
        elif name == "code":
            items = build_code_items(Path(sysconfig.get_paths()["purelib"]), embedder, 300)
        else:
            items = checked_items(Path(name))
        items = items[:max_queries] if max_queries else items
        for m in merges:
            key = name if len(merges) == 1 else f"{name} ({m})"
            title = f"{key}: {len(items)} queries, {seeds} trials each"
            rows = _power(items, embedder, rule, consumer, seeds, champion, m, title)
            report["domains"][key] = {
                "queries": len(items),
                "champion": champion,
                "merge": m,
                "previews": consumer.previews,
                "challengers": rows,
            }
            if not as_json:
                _print_power(
                    f"{key}: {len(items)} queries; champion {champion}; {seeds} trials per challenger; the consumer "
                    f"reads {consumer.previews} previews",
                    rows,
                )
    emit(report, as_json, out, lambda console: None)  # the tables are printed above, domain by domain


def _power(
    items: list[dict], embedder, rule, consumer, seeds: int, champion: str, merge: str, title: str
) -> list[dict]:
    with progress_bar() as bar:
        task = bar.add_task(title, total=10)
        progress = lambda t=task: bar.advance(t)  # noqa: E731
        return trial_power.domain_report(
            items, embedder, rule, consumer, seeds, progress=progress, champion=champion, merge=merge
        )


def _print_power(title: str, rows: list[dict]) -> None:
    t = Table(title=title)
    cols = (
        "challenger",
        "recall@5",
        "gain [95% CI]",
        "promoted",
        "rejected",
        "cited to promote",
        "queries (fixed share)",
        "max cost (fixed share)",
    )
    for col in cols:
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            r["challenger"],
            f"{r['recall@5']:.3f}",
            f"{r['gain']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}]",
            f"{r['promoted']:.0%}",
            f"{r['rejected']:.0%}",
            str(r["median_judged_to_promote"] or "-"),
            f"{r['median_served']} ({r['median_served_fixed']})",
            f"{r['max_cost']:.4f} ({r['max_cost_fixed']:.4f})",
        )
    console.print(t)


@tools.command("gpu-smoke", rich_help_panel=LAB_GPU, short_help="The train stage on random weights: VRAM, step time.")
def gpu_smoke_command(
    data: Annotated[
        Path, typer.Option(help="a build-stage folder (train.jsonl) built with the GPU chunk_tokens (200)")
    ],
    tokenizer: Annotated[Path, typer.Option(help="the saved Qwen2 tokenizer folder ($PAI_HOME/cache/qwen2-tokenizer)")],
    out: Annotated[Path, typer.Option(help="the JSON report, rewritten after every phase")] = Path("gpu_smoke.json"),
    size: Annotated[str, typer.Option(help="14b (Qwen2.5-14B's shapes) or tiny (runs on a CPU)")] = "14b",
    backend: Annotated[
        Optional[list[str]], typer.Option("--backend", help="unsloth, hf4bit or hf; tried in order until one trains")
    ] = None,
    batches: Annotated[str, typer.Option(help="per-device batch sizes to measure")] = "1,2",
    steps: Annotated[int, typer.Option(help="train steps per batch size")] = 3,
    prequantize: Annotated[
        bool,
        typer.Option("--prequantize", help="save the 4-bit model and load that, as the real -bnb-4bit checkpoint is"),
    ] = False,
    base_dir: Annotated[
        Optional[Path], typer.Option(help="where the random checkpoint is written (default: /dev/shm or a temp dir)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
) -> None:
    """GPU smoke run of the train stage's Unsloth path on random weights: peak VRAM, step time, tokens/s."""
    if size not in ("14b", "tiny") or any(b not in ("unsloth", "hf4bit", "hf") for b in backend or []):
        _fail("--size is 14b or tiny; --backend is unsloth, hf4bit or hf")
    gpu_smoke.run(
        data,
        tokenizer,
        out,
        size,
        backend,
        [int(b) for b in batches.split(",")],
        steps,
        prequantize,
        base_dir,
        str(params),
    )
    if as_json:
        print(out.read_text(), end="")
    else:
        console.print(f"gpu-smoke: {out}: {', '.join(json.loads(out.read_text())['phases'])}", soft_wrap=True)


@loop_app.command("report", short_help="Held-out Recall@5 after each retrain, with 95 % CIs.")
def loop_report(
    slices: Annotated[int, typer.Option(help="chronological slices of the SciFact feedback (one retrain each)")] = 3,
    max_queries: Annotated[int, typer.Option(help="held-out queries per benchmark (0 = all)")] = 0,
    out_dir: Annotated[
        Optional[Path],
        typer.Option(help="folder for loop.json and loop_recall.csv (default: params.yaml evaluate.out)"),
    ] = None,
    consumer: Annotated[
        Optional[str],
        typer.Option(
            help="on-policy: serve each slice of SciFact train with the current champion, this consumer posting "
            "feedback (realistic: cites within its context; oracle: judges all 20, the bound), retrain, promote"
        ),
    ] = None,
    explore_rate: Annotated[
        Optional[float], typer.Option(help="on-policy: search.explore_rate while serving (default: params.yaml's)")
    ] = None,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """Retrain the learned ranker after each slice of the feedback; held-out Recall@5 with 95% CIs per cycle.
    With --consumer, the loop runs on-policy through the service (`cli/lab/onpolicy.py`)."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    if slices < 1:
        _fail("--slices must be >= 1")
    try:
        out_dir = Path(load_section(params, "evaluate", EvaluateParams).out) if out_dir is None else out_dir
    except ParamsError as e:
        _fail(str(e))
    if consumer is not None:
        if consumer not in ("realistic", "oracle"):
            _fail(f"--consumer {consumer!r}: realistic or oracle")
        if explore_rate is not None and not 0 <= explore_rate < 1:
            _fail("--explore-rate must be in [0, 1)")
        try:
            result = onpolicy.run_on_policy(
                params, benchmark_dir, consumer, slices, explore_rate, max_queries, log=console.print
            )
        except (ParamsError, FileNotFoundError, ValueError, DatabaseError) as e:
            _fail(str(e))
        tag = f"{consumer}{'' if explore_rate is None else f'-explore{explore_rate:g}'}"
        onpolicy.write_on_policy(result, out_dir / f"loop_onpolicy_{tag}.json")
        emit(result, as_json, None, lambda c: onpolicy.print_on_policy(result, c))
        return
    try:
        result = run_loop(params, slices, max_queries, log=lambda s: console.print(s, soft_wrap=True))
    except (ParamsError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    write_outputs(result, out_dir)
    emit(result, as_json, None, lambda c: print_loop(result, c))


app.add_typer(cycle.app)  # no name: a module's commands join this group
app.add_typer(lab_feedback.app)
app.add_typer(teacher.app)
app.add_typer(tools)
app.add_typer(loop_app, name="loop", rich_help_panel=LAB_FEEDBACK)
loop_app.add_typer(loop_trial.app)
app.add_typer(
    bench.app,
    name="bench",
    rich_help_panel=LAB_BENCH,
    short_help="Benchmarks: ingest, the store, ranking, the service, capture.",
)
