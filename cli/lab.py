"""`pai lab`: the tools of experiments beside the main job, registered here, one line each. `simulate`
fills the feedback log from a benchmark (a stand-in for real consumers); `loop report` retrains over
slices of it (cli/loop.py, cli/onpolicy.py); `loop trial` runs on-policy cycles per domain in which only the
trial by interleaving promotes (cli/loop_trial.py); `grounding` shows what reading the answers would change in a
pulled log (retrieval/logs/grounding.py); `gpu-smoke` runs the train stage's GPU path on random
weights (training/gpu_smoke.py). The benchmarks proper are `pai bench` (cli/bench.py).

Flags mean the same in every command: `--json` prints JSON to stdout, `--out FILE` writes it to a
file, `--benchmark-dir` is the judged benchmark folder, `--max-queries` caps the queries."""

from __future__ import annotations

import json
import sysconfig
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from eval.bench import trial_power
from eval.code_bench import build as build_code_items
from eval.items import checked_items
from retrieval.contracts.interleaving import TrialParams
from retrieval.embed import get_embedder
from retrieval.logs.feedback import FEEDBACK_FILE
from retrieval.logs.grounding import grounding_report
from retrieval.logs.used import label_changes, used_labels
from retrieval.params import BENCHMARK_DIR, ParamsError, UsedParams, load_section
from training import gpu_smoke
from training.pull import PullParams

from . import loop_trial, pipeline
from .replay import write_notes
from .terminal import BenchDirOpt, JsonOpt, ParamsOpt, _fail, console, emit, progress_bar

app = typer.Typer(
    no_args_is_help=True,
    help="Lab tools: simulated feedback, the loop report, the GPU path.\n\n"
    "Experiments beside the main job; their figures are in docs/measurements.md, each with its command.",
)
loop_app = typer.Typer(
    no_args_is_help=True,
    help="Does the loop learn? Retrains over the log; trial-decided cycles.",
)


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


def _feedback_record(rec) -> bool:
    """The fields `grounding_report` and `used_labels` read, with their types."""
    return (
        isinstance(rec, dict)
        and isinstance(rec.get("answer"), (str, type(None)))
        and isinstance(rec.get("rating"), (int, type(None)))
        and isinstance(rec.get("candidates"), list)
        and all(
            isinstance(c, dict)
            and isinstance(c.get("rank"), int)
            and isinstance(c.get("text"), (str, type(None)))
            and isinstance(c.get("used"), (bool, type(None)))
            and isinstance(c.get("shown"), (bool, type(None)))
            for c in rec["candidates"]
        )
    )


def grounding_command(
    feedback: Annotated[
        Optional[Path], typer.Option(help="the pull stage's folder (feedback.jsonl); default: params.yaml pull.out")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
) -> None:
    """How the answers in the feedback log ground their citations, and what params.yaml's `used` section (the one
    definition of used: min_uncited, void_thumbs_down) changes: choose them on your consumer's answers
    (retrieval/logs/grounding.py, retrieval/logs/used.py)."""
    try:
        p = load_section(params, "used", UsedParams)
        feedback = Path(load_section(params, "pull", PullParams).out) if feedback is None else feedback
    except (OSError, ParamsError) as e:
        _fail(f"{params}: {e}")
    path = feedback / FEEDBACK_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        _fail(f"{path}: {e} (run `dvc repro pull` or `python -m training.pull` first)")
    records = []
    for i, line in enumerate(lines, start=1):
        try:
            rec = json.loads(line) if line.strip() else None
        except ValueError as e:
            _fail(f"{path}:{i}: not JSON: {e}")
        if rec is not None and not _feedback_record(rec):
            _fail(f"{path}:{i}: not a feedback record (answer: text or null; candidates: rank, text, used, shown)")
        if rec is not None:
            records.append(rec)
    result = grounding_report(records) | {
        "at_params": asdict(p) | label_changes(records, [used_labels(r, p) for r in records])
    }

    def show(c) -> None:
        t = Table(
            title=f"{result['answers']} answers, {result['citations']} citations ({result['citations_judged']} with a "
            f"sentence to judge by); support quantiles {result['support_quantiles']}"
        )
        for col in ("threshold", "citations grounded below it", "uncited quotes counted (min_uncited)"):
            t.add_column(col, justify="right")
        for th, share in result["support_below"].items():
            t.add_row(th, f"{share:.1%}", str(result["uncited_quotes_at"][th]))
        c.print(t)
        c.print(f"at params.yaml's used: {result['at_params']}", soft_wrap=True)

    emit(result, as_json, None, show)


# The map `pai lab --help` shows: one panel per subject, one line per command.
FEEDBACK, GPU = "The feedback loop", "The GPU path"
app.command("cycle", rich_help_panel=FEEDBACK, short_help="The demo: ingest SciFact, replay, dvc repro, measure.")(
    pipeline.cycle
)
app.command("simulate", rich_help_panel=FEEDBACK, short_help="Replay benchmark queries and a consumer's feedback.")(
    pipeline.simulate
)
app.add_typer(loop_app, name="loop", rich_help_panel=FEEDBACK)
app.command("grounding", rich_help_panel=FEEDBACK, short_help="What reading the answers would change in the log.")(
    grounding_command
)
loop_app.command("report", short_help="Held-out Recall@5 after each retrain, with 95 % CIs.")(pipeline.loop_report)
loop_app.command("trial", short_help="On-policy cycles per domain, the trial the only judge.")(loop_trial.command)


def notes_command(
    out: Annotated[Path, typer.Argument(help="the folder to write the notes into")],
    dataset: Annotated[str, typer.Option(help="scifact or hotpotqa (under --benchmark-dir)")] = "scifact",
    corpus_limit: Annotated[Optional[int], typer.Option(help="the train queries' documents + N others")] = None,
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
) -> None:
    """Write a benchmark's corpus as markdown notes named by document id: a store of notes to `pai ingest`,
    whose queries `pai lab simulate --no-ingest` can still judge."""
    try:
        n = write_notes(benchmark_dir, dataset, out, corpus_limit)
    except (OSError, ValueError) as e:
        _fail(str(e))
    console.print(f"wrote {n} notes to {out}")


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
        typer.Option(help="the trial contexts to compare on the same items: team-draft (served), agreed-first, union"),
    ] = "team-draft",
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: Annotated[Optional[Path], typer.Option(help="write the report as JSON here")] = None,
) -> None:
    """Power of the trial by interleaving: share of simulated trials that promote each challenger, against its
    judged Recall@5 gain over the champion (hybrid), per domain (eval/bench/trial_power.py)."""
    try:
        rule = load_section(params, "trial", TrialParams)
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
            rows = _power(items, embedder, rule, seeds, champion, m, title)
            report["domains"][key] = {
                "queries": len(items),
                "champion": champion,
                "merge": m,
                "challengers": rows,
            }
            if not as_json:
                _print_power(f"{key}: {len(items)} queries; champion {champion}; {seeds} trials per challenger", rows)
    emit(report, as_json, out, lambda console: None)  # the tables are printed above, domain by domain


def _power(items: list[dict], embedder, rule, seeds: int, champion: str, merge: str, title: str) -> list[dict]:
    with progress_bar() as bar:
        task = bar.add_task(title, total=10)
        consumer = trial_power.Consumer()
        progress = lambda t=task: bar.advance(t)  # noqa: E731
        return trial_power.domain_report(
            items, embedder, rule, consumer, seeds, progress=progress, champion=champion, merge=merge
        )


def _print_power(title: str, rows: list[dict]) -> None:
    t = Table(title=title)
    for col in ("challenger", "recall@5", "gain [95% CI]", "promoted", "rejected", "cited to promote", "max cost"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            r["challenger"],
            f"{r['recall@5']:.3f}",
            f"{r['gain']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}]",
            f"{r['promoted']:.0%}",
            f"{r['rejected']:.0%}",
            str(r["median_judged_to_promote"] or "-"),
            f"{r['max_cost']:.4f}",
        )
    console.print(t)


app.command("notes", rich_help_panel=FEEDBACK, short_help="A benchmark's corpus as a folder of markdown notes.")(
    notes_command
)
app.command("trial", rich_help_panel=FEEDBACK, short_help="Power of the trial by interleaving, per domain.")(
    trial_command
)
app.command("gpu-smoke", rich_help_panel=GPU, short_help="The train stage on random weights: VRAM, step time.")(
    gpu_smoke_command
)
