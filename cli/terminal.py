"""What the `pai` commands print with: one stderr console (stdout stays clean for --json), one-line
errors, progress bars. Piped to a log (`pai lab cycle > cycle.log 2>&1`, as CI and cron run it), the
console is wide and never wraps or cuts a line: every figure of a summary line reaches the log, and
tables keep their columns."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from eval.scifact_bench import BenchmarkParams
from retrieval.params import ParamsError, load_section
from retrieval.progress import make_progress

LOG_WIDTH = 240  # columns when stderr is not a terminal: wide enough for every table, no "…" cuts


def make_console() -> Console:
    """A stderr console: the terminal's width on a terminal; piped, LOG_WIDTH with lines never wrapped."""
    return Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=LOG_WIDTH, soft_wrap=True)


console = make_console()  # progress and tables on stderr; --json output alone on stdout
ParamsOpt = Annotated[Path, typer.Option("--params", help="params.yaml to read")]  # the lab's: run in the checkout
# the commands a user runs from any folder: None, the rule of retrieval.params.params_files
FoundParamsOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--params",
        help="params.yaml to read (default: ./params.yaml in a pai-brain checkout, else the packaged defaults with "
        "$PAI_HOME/params.yaml's overrides)",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON on stdout")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", help="also write the result (JSON) to this file")]
# --benchmark-dir: None is params.yaml's benchmark.benchmark_dir, which `judged_dir` reads
BenchDirOpt = Annotated[
    Optional[Path],
    typer.Option(
        help="the judged benchmark folder (SciFact, HotpotQA; default: params.yaml benchmark.benchmark_dir)",
        show_default=False,
    ),
]

# The panels of the help maps: each command names its own where it is registered (`pai --help`, `pai lab bench
# --help`, `pai lab --help` list them in this order).
USE, RETRAIN, UPKEEP, LAB = "Use", "Retrain and deploy", "Upkeep", "The lab"
BENCH_INGEST, BENCH_RANKING, BENCH_SERVICE, BENCH_SETS = (
    "Ingest, capture and the store",
    "Ranking",
    "The service",
    "Benchmark sets",
)
LAB_FEEDBACK, LAB_GPU, LAB_BENCH = "The feedback loop", "The GPU path", "Benchmarks"


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}", soft_wrap=True)  # one line, however narrow the terminal
    raise typer.Exit(2)


def judged_dir(params: Path | None, given: Path | None) -> Path:
    """--benchmark-dir as given, else params.yaml's benchmark.benchmark_dir; a bad params file: one line, exit 2."""
    if given is not None:
        return given
    try:
        return Path(load_section(params, "benchmark", BenchmarkParams).benchmark_dir)
    except ParamsError as e:
        _fail(str(e))


def benchmark_file(params: Path | None, given: Path | None) -> Path:
    """--benchmark as given, else the benchmark stage's file (params.yaml benchmark: out and split); a bad params
    file: one line, exit 2."""
    if given is not None:
        return given
    try:
        return load_section(params, "benchmark", BenchmarkParams).file
    except ParamsError as e:
        _fail(str(e))


def progress_bar(every_s: float = 30.0) -> Progress:
    """A live bar on a terminal; piped, a line per running task every `every_s` seconds (`retrieval.progress`)."""
    return make_progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        every_s=every_s,
    )


def emit(result, as_json: bool, out: Path | None, table) -> None:
    """A command's result: written to `out` as JSON when given, then printed as JSON or as `table` (a
    renderable, or a function that prints to the console)."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    if as_json:
        print(json.dumps(result, indent=2))
    elif callable(table):
        table(console)
    else:
        console.print(table)


def machine() -> str:
    """The machine a figure was measured on (STYLE 13)."""
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
