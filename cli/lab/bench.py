"""`pai lab bench`: every benchmark, one line each in `pai lab bench --help` (docs/measurements.md cites these
commands). Each command is registered where its body is, in the module of its subject; this group puts
them together, in the order the help lists them:

- `ingest`, `embed`, `seq-length`, `scrub`: cli/lab/bench_ingest.py (cores in eval/bench/)
- `capture`: cli/lab/bench_capture.py
- `retrieval`, `general`, `usage`: cli/lab/bench_retrieval.py (cores in eval/bench/)
- `serve`, `policy`, `swap`, `memory`, `memory-orders`, `served-recall`: cli/lab/bench_serve.py, bench_policy.py,
  bench_swap.py, bench_memory.py, bench_served.py
  (they start a service, so their cores are in cli/lab/ too)
- `build-code`, `build-man`, `build-domains`: cli/lab/bench_sets.py

Flags mean the same in every command: `--json` prints JSON to stdout, `--out FILE` writes it to a
file, `--benchmark-dir` is the judged benchmark folder, `--max-queries` caps the queries."""

from __future__ import annotations

import typer

from . import (
    bench_capture,
    bench_ingest,
    bench_memory,
    bench_policy,
    bench_retrieval,
    bench_serve,
    bench_served,
    bench_sets,
    bench_swap,
)

app = typer.Typer(
    no_args_is_help=True,
    help="Benchmarks: each measures one thing, side by side in one run.\n\n"
    "Every figure in docs/measurements.md names the command here that made it; --json prints the result, "
    "--out FILE writes it.",
)
for module in (
    bench_ingest,
    bench_capture,
    bench_retrieval,
    bench_serve,
    bench_policy,
    bench_swap,
    bench_memory,
    bench_served,
    bench_sets,
):
    app.add_typer(module.app)  # no name: the module's commands join this group
