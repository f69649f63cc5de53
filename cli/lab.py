"""`pai lab`: the tools of experiments beside the main job, registered here, one line each. `simulate`
fills the feedback log from a benchmark (a stand-in for real consumers); `loop report` retrains over
slices of it (cli/loop.py, cli/onpolicy.py); `grounding` shows what reading the answers would change in a
pulled log (retrieval/logs/grounding.py); `gpu-smoke` runs the train stage's GPU path on random
weights (training/gpu_smoke.py). The benchmarks proper are `pai bench` (cli/bench.py).

Flags mean the same in every command: `--json` prints JSON to stdout, `--out FILE` writes it to a
file, `--benchmark-dir` is the judged benchmark folder, `--max-queries` caps the queries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from retrieval.logs.feedback import FEEDBACK_FILE
from retrieval.logs.grounding import grounding_report, regrounded_counts
from retrieval.params import ParamsError, load_section
from training import gpu_smoke
from training.build import BuildParams

from . import pipeline
from .terminal import JsonOpt, ParamsOpt, _fail, console, emit

app = typer.Typer(
    no_args_is_help=True,
    help="Lab tools: simulated feedback, the loop report, the GPU path.\n\n"
    "Experiments beside the main job; their figures are in docs/measurements.md, each with its command.",
)
loop_app = typer.Typer(no_args_is_help=True, help="Does the loop learn? Retrain over slices of the feedback log.")


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
    """The fields `grounding_report` reads, with their types."""
    return (
        isinstance(rec, dict)
        and isinstance(rec.get("answer"), (str, type(None)))
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
    feedback: Annotated[Path, typer.Option(help="the pull stage's folder (feedback.jsonl)")] = Path("data/feedback"),
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
) -> None:
    """How the answers in the feedback log ground their citations, and what build.min_support / min_uncited would
    change: choose them on your consumer's answers (retrieval/logs/grounding.py)."""
    path = feedback / FEEDBACK_FILE
    try:
        p = load_section(params, "build", BuildParams)
    except (OSError, ParamsError) as e:
        _fail(f"{params}: {e}")
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
        "at_params": {"min_support": p.min_support, "min_uncited": p.min_uncited}
        | regrounded_counts(records, p.min_support, p.min_uncited)
    }

    def show(c) -> None:
        t = Table(
            title=f"{result['answers']} answers, {result['citations']} citations ({result['citations_judged']} with a "
            f"sentence to judge by); support quantiles {result['support_quantiles']}"
        )
        for col in ("threshold", "citations taken back (min_support)", "uncited quotes counted (min_uncited)"):
            t.add_column(col, justify="right")
        for th, share in result["taken_back_below"].items():
            t.add_row(th, f"{share:.1%}", str(result["uncited_quotes_at"][th]))
        c.print(t)
        c.print(f"at params.yaml's build: {result['at_params']}", soft_wrap=True)

    emit(result, as_json, None, show)


# The map `pai lab --help` shows: one panel per subject, one line per command.
FEEDBACK, GPU = "The feedback loop", "The GPU path"
app.command("simulate", rich_help_panel=FEEDBACK, short_help="Replay benchmark queries and a consumer's feedback.")(
    pipeline.simulate
)
app.add_typer(loop_app, name="loop", rich_help_panel=FEEDBACK)
app.command("grounding", rich_help_panel=FEEDBACK, short_help="What reading the answers would change in the log.")(
    grounding_command
)
loop_app.command("report", short_help="Held-out Recall@5 after each retrain, with 95 % CIs.")(pipeline.loop_report)
app.command("gpu-smoke", rich_help_panel=GPU, short_help="The train stage on random weights: VRAM, step time.")(
    gpu_smoke_command
)
