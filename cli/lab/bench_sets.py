"""`pai lab bench build-code`, `build-man`, `build-domains`: the benchmark sets built from this machine's material (a
contract-5 JSONL each, 20 candidates per query mined by our hybrid first stage): eval/code_bench.py,
eval/man_bench.py, eval/domains.py."""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Annotated, Optional

import typer

from eval import code_bench, domains, man_bench
from eval.code_bench import CodeBenchParams
from retrieval.embed import get_embedder
from retrieval.params import ParamsError, load_section

from ..terminal import BENCH_SETS, ParamsOpt, _fail, console, progress_bar

app = typer.Typer()


@app.command(
    "build-code", rich_help_panel=BENCH_SETS, short_help="Build the code-search set: docstring -> its function."
)
def build_code_command(
    out: Annotated[
        Optional[Path], typer.Option(help="the contract-5 JSONL to write (default: params.yaml code_bench.out)")
    ] = None,
    queries: Annotated[
        Optional[int],
        typer.Option(min=1, help="queries (documented functions) to sample (default: params.yaml code_bench.queries)"),
    ] = None,
    site_packages: Annotated[
        Optional[Path], typer.Option(help="where the packages are (default: this interpreter's site-packages)")
    ] = None,
    seed: Annotated[
        Optional[int], typer.Option(help="which functions are sampled (default: params.yaml code_bench.seed)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """A lexical-mismatch set from this machine: docstrings as queries for their functions' bodies (docstring
    removed), 19 distractors mined by our hybrid first stage over all pooled functions (eval/code_bench.py)."""
    try:
        p = load_section(params, "code_bench", CodeBenchParams)
    except ParamsError as e:
        _fail(str(e))
    root = site_packages or Path(sysconfig.get_paths()["purelib"])
    out = Path(p.out) if out is None else out
    queries, seed = p.queries if queries is None else queries, p.seed if seed is None else seed
    _build_mined("build-code", "code search", code_bench.build, root, queries, seed, out)


def _build_mined(command: str, what: str, build, root: Path, queries: int, seed: int, out: Path) -> None:
    """A contract-5 set mined from material on this machine (`build(root, embedder, queries, seed=, progress=)`)."""
    try:
        with progress_bar() as bar:
            task = bar.add_task(f"{what}: mine candidates", total=queries)
            items = build(root, get_embedder(), queries, seed=seed, progress=lambda: bar.advance(task))
    except (OSError, ValueError) as e:
        _fail(str(e))
    code_bench.write(items, out)
    console.print(f"{command}: {len(items)} queries, 20 candidates each, from {root} -> {out}")


@app.command(
    "build-man", rich_help_panel=BENCH_SETS, short_help="Build the man-page set: a page's summary -> its text."
)
def build_man_command(
    out: Annotated[Path, typer.Option(help="the contract-5 JSONL to write")] = Path("data/benchmarks/man-pages.jsonl"),
    queries: Annotated[int, typer.Option(min=1, help="queries (manual pages) to sample")] = 400,
    man_root: Annotated[Path, typer.Option(help="the manual's root (sections man1, man5, man7, man8)")] = Path(
        "/usr/share/man"
    ),
    seed: Annotated[int, typer.Option(help="which pages are sampled")] = 0,
) -> None:
    """A paraphrase set from this machine: each manual page's one-line summary (NAME) as the query for its
    DESCRIPTION, 19 distractors mined by our hybrid first stage over all pooled pages (eval/man_bench.py)."""
    _build_mined("build-man", "manual pages", man_bench.build, man_root, queries, seed, out)


@app.command("build-domains", rich_help_panel=BENCH_SETS, short_help="Build the day-one domain set (docs/domains.md).")
def build_domains_command(
    out: Annotated[Path, typer.Option(help="the folder the domains' contract-5 files are written to")] = Path(
        "data/domains"
    ),
    names: Annotated[str, typer.Option("--domains", help="comma-separated domains")] = ",".join(domains.BUILDERS),
    queries: Annotated[int, typer.Option(min=1, help="queries per domain (at most)")] = 400,
    seed: Annotated[int, typer.Option(help="which queries are sampled")] = 0,
) -> None:
    """The day-one domain set from the judged sets and this machine's material (eval/domains.py, docs/domains.md)."""
    try:
        with progress_bar() as bar:
            counts = domains.build([n.strip() for n in names.split(",")], out, get_embedder(), queries, seed, bar)
    except (OSError, ValueError) as e:
        _fail(str(e))
    console.print(f"build-domains: {counts} -> {out}")
