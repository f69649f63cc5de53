"""`pai`: a thin command line over the stage functions. Each command: parse -> call core -> print.

Every command is registered where its body is, with its panel and its line in the help (`@app.command`
in its module); this module puts the modules' commands together in the order `pai --help` lists them:

- Use: `ingest`, `query`, `serve` (cli/memory.py), `mcp` (cli/assistant.py), `watch` (cli/hooks.py),
  `capture` (cli/capture.py), `forget` (cli/forget.py), the `hooks` group (cli/hooks.py)
- Retrain and deploy: `retrain`, `eval` (cli/retrain.py), `status`, `promote`, `rollback` (cli/promote.py),
  the `job` group (cli/jobs.py)
- Upkeep: `maintain`, `migrate` (cli/maintain.py), `export`, `import` (cli/archive.py)
- The lab: the `lab` group (cli/lab/group.py): the benchmarks (`pai lab bench`, cli/lab/bench.py), the demo cycle,
  the loops, the GPU path. The lab lives apart in cli/lab/ (docs/architecture.md); `pai bench` is the hidden
  deprecated alias of `pai lab bench` for one release."""

from __future__ import annotations

import sys

import typer

from eval import judged_sets

from . import archive, assistant, capture, forget, hooks, jobs, maintain, memory, promote, retrain
from .lab import bench, group
from .terminal import LAB, RETRAIN, USE, console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="pai-brain: retrieval on PostgreSQL + pgvector, a learned selector that picks the context, and a "
    "pipeline that retrains it from feedback.\n\n"
    "Start with `pai ingest PATH` and `pai serve` (or `pai mcp`); once answers cite \\[n], `pai retrain`. "
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
    group.app,
    name="lab",
    rich_help_panel=LAB,
    short_help="Benchmarks, the demo cycle, the loops, the GPU path.",
)


def bench_moved() -> None:
    print("`pai bench` is now `pai lab bench`", file=sys.stderr)


# `pai bench`: the same group as `pai lab bench`, hidden, kept one release for the scripts that call it
app.add_typer(
    bench.app,
    name="bench",
    hidden=True,
    callback=bench_moved,
    help=f"Deprecated: `pai bench` is now `pai lab bench`.\n\n{bench.app.info.help}",
)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
