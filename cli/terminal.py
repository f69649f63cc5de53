"""What the `pai` commands print with: one stderr console (stdout stays clean for --json), one-line
errors, progress bars."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

console = Console(stderr=True)  # progress and tables on stderr; --json output alone on stdout
ParamsOpt = Annotated[Path, typer.Option("--params", help="params.yaml to read")]


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}", soft_wrap=True)  # one line, however narrow the terminal
    raise typer.Exit(2)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
    )  # fmt: skip
