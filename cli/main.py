"""`pai`: a thin command line over the stage functions. Each command: parse -> call core -> print.

Every command is registered where its body is, with its panel and its line in the help (`@app.command`
in its module); this module puts the modules' commands together in the order `pai --help` lists them:

- Use: `ingest`, `query`, `serve` (cli/memory.py), `mcp` (cli/assistant.py), `watch` (cli/hooks.py),
  `capture` (cli/capture.py), `forget` (cli/forget.py), the `hooks` group (cli/hooks.py)
- Retrain and deploy: `retrain`, `eval` (cli/retrain.py), `status`, `promote`, `rollback` (cli/promote.py),
  the `job` group (cli/jobs.py)
- Upkeep: `maintain`, `migrate` (cli/maintain.py), `export`, `import` (cli/archive.py)
- Measure: the `bench` group (cli/bench.py), the `lab` group (cli/lab.py)"""

from __future__ import annotations

import sys

import typer

from eval import judged_sets

from . import archive, assistant, bench, capture, forget, hooks, jobs, lab, maintain, memory, promote, retrain
from .terminal import MEASURE, RETRAIN, USE, console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="pai-brain: retrieval on PostgreSQL + pgvector, a learned selector that picks the context, and a "
    "pipeline that retrains it from feedback.\n\n"
    "Start with `pai ingest PATH` and `pai serve` (or `pai mcp`); once answers cite [n], `pai retrain`. "
    "`pai lab cycle` is the lab's demo on SciFact. "
    "`pai COMMAND --help` for each; docs/ for the rest.",
)


@app.callback()
def unpack_judged_sets() -> None:
    # Before any command: the judged benchmark sets the repository ships (data/judged/), unpacked where missing,
    # so a fresh clone's commands and `dvc repro` read them at their default paths. One line when it unpacks.
    try:
        written = judged_sets.unpack(judged_sets.JUDGED)
    except OSError as e:  # a read-only checkout: only the commands that read them will miss them
        console.print(f"[yellow]warning:[/yellow] could not unpack the judged benchmark sets: {e}", soft_wrap=True)
        return
    if written:
        console.print(f"unpacked {len(written)} judged benchmark files into {judged_sets.JUDGED}", soft_wrap=True)


# The map: a module's commands join `pai` (add_typer with no name); a group gets its name and its line here.
for module in (memory, assistant):
    app.add_typer(module.app)
app.add_typer(hooks.app)  # `pai watch`
app.add_typer(capture.app)
app.add_typer(forget.app)  # `pai forget`
app.add_typer(
    hooks.hooks_app, name="hooks", rich_help_panel=USE, short_help="Git post-commit and assistant turn-end hooks."
)
for module in (retrain, promote):
    app.add_typer(module.app)
app.add_typer(
    jobs.job_app, name="job", rich_help_panel=RETRAIN, short_help="Pipeline stages in containers (a GPU box)."
)
app.add_typer(maintain.app)
app.add_typer(archive.app)  # `pai export`, `pai import`
app.add_typer(
    bench.app,
    name="bench",
    rich_help_panel=MEASURE,
    short_help="Benchmarks: ingest, the store, ranking, the service, capture.",
)
app.add_typer(
    lab.app,
    name="lab",
    rich_help_panel=MEASURE,
    short_help="Lab tools: simulate, loop report, gpu-smoke.",
)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
