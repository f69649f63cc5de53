"""The lab's feedback log: `pai lab simulate` fills one by replaying a benchmark's queries through the service with
a simulated consumer (cli/lab/replay.py), `pai lab notes` writes a benchmark's corpus as markdown notes (a store of
notes that `simulate --no-ingest` can still judge), `pai lab grounding` shows what reading the answers would change
in a pulled log (retrieval/logs/grounding.py, retrieval/logs/used.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from retrieval.db import DatabaseError
from retrieval.logs.feedback_records import FEEDBACK_FILE
from retrieval.logs.grounding import grounding_report
from retrieval.logs.used import label_changes, used_labels
from retrieval.params import ParamsError, UsedParams, load_section
from training.pull import PullParams

from ..terminal import LAB_FEEDBACK, BenchDirOpt, JsonOpt, ParamsOpt, _fail, console, emit, judged_dir, progress_bar
from .replay import run_replay, write_notes

app = typer.Typer()


@app.command("simulate", rich_help_panel=LAB_FEEDBACK, short_help="Replay benchmark queries and a consumer's feedback.")
def simulate(
    dataset: Annotated[str, typer.Option(help="scifact or hotpotqa (under --benchmark-dir)")] = "scifact",
    split: Annotated[str, typer.Option(help="which queries to replay")] = "train",
    url: Annotated[Optional[str], typer.Option(help="a running service; default: start one in-process")] = None,
    max_queries: Annotated[Optional[int], typer.Option(help="replay only the first N queries")] = None,
    offset: Annotated[int, typer.Option(help="skip the first N queries of the split")] = 0,
    corpus_limit: Annotated[Optional[int], typer.Option(help="ingest only the relevant documents + N others")] = None,
    ingest: Annotated[
        bool, typer.Option(help="ingest the corpus first (--no-ingest: the store holds it, e.g. as `pai lab notes`)")
    ] = True,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Replay benchmark queries through /query and post qrels-based feedback: a realistic feedback log."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        with progress_bar() as bar:
            summary = run_replay(
                params,
                benchmark_dir,
                dataset,
                split,
                bar,
                url=url,
                limit=max_queries,
                corpus_limit=corpus_limit,
                ingest=ingest,
                offset=offset,
            )
    except (ParamsError, DatabaseError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    for err in summary.errors[:5]:
        console.print(f"[yellow]failed:[/yellow] {err}")
    t = Table(title=f"replay {dataset} {split}", show_header=False)
    for k, v in summary.as_dict().items():
        t.add_row(k, str(v))
    emit(summary.as_dict(), as_json, None, t)


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


@app.command("grounding", rich_help_panel=LAB_FEEDBACK, short_help="What reading the answers would change in the log.")
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


@app.command("notes", rich_help_panel=LAB_FEEDBACK, short_help="A benchmark's corpus as a folder of markdown notes.")
def notes_command(
    out: Annotated[Path, typer.Argument(help="the folder to write the notes into")],
    dataset: Annotated[str, typer.Option(help="scifact or hotpotqa (under --benchmark-dir)")] = "scifact",
    corpus_limit: Annotated[Optional[int], typer.Option(help="the train queries' documents + N others")] = None,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Write a benchmark's corpus as markdown notes named by document id: a store of notes to `pai ingest`,
    whose queries `pai lab simulate --no-ingest` can still judge."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        n = write_notes(benchmark_dir, dataset, out, corpus_limit)
    except (OSError, ValueError) as e:
        _fail(str(e))
    console.print(f"wrote {n} notes to {out}")
