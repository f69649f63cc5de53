"""`pai bench`: every benchmark, registered here, one line each (docs/measurements.md cites these
commands). The commands of the offline benches are below, their cores in eval/bench/. The benches that
drive a running service keep their commands in cli/pipeline.py (retrieval, serve, policy, swap; their
cores cli/bench_*.py), `usage` and `capture` beside the commands of the store they read
(cli/maintain.py, cli/capture.py).

Flags mean the same in every command: `--json` prints JSON to stdout, `--out FILE` writes it to a
file, `--benchmark-dir` is the judged benchmark folder, `--max-queries` caps the queries."""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Annotated, Optional

import typer

from eval import code_bench, domains, man_bench
from eval.bench import day_one, embed, general_fusion, ingest, scrub, seq_length
from eval.items import bench_name, checked_items
from retrieval.db import DatabaseError
from retrieval.embed import get_embedder
from retrieval.fusion import GeneralRule
from retrieval.params import BENCHMARK_DIR, EmbedParams, IngestParams, SearchParams, load_section

from . import bench_memory, capture, maintain, pipeline
from .terminal import BenchDirOpt, JsonOpt, OutOpt, ParamsOpt, _fail, console, emit, machine, progress_bar

app = typer.Typer(
    no_args_is_help=True,
    help="Benchmarks: each measures one thing, side by side in one run.\n\n"
    "Every figure in docs/measurements.md names the command here that made it; --json prints the result, "
    "--out FILE writes it.",
)
INGEST, RANKING, SERVICE, SETS = "Ingest, capture and the store", "Ranking", "The service", "Benchmark sets"


def bench_scrub_command(
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    repo: Annotated[Path, typer.Option(help="the repository whose .py files are the code sample")] = Path("."),
    providers: Annotated[Path, typer.Option(help="the provider corpus (JSONL of text + secret)")] = Path(
        "tests/data/provider_corpus.jsonl"
    ),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The secret scrubber: recall on a provider corpus (with and without the rule set), the mechanism corpus by
    source and mechanism, placeholders redacted, and false positives: tokens it changes in SciFact's abstracts,
    lines in this repository's code."""
    try:
        m = scrub.measure(benchmark_dir / "scifact" / "corpus.jsonl", repo.resolve())
        m["providers"] = scrub.providers(providers)
        m["mechanisms"] = scrub.mechanisms(providers)
        m["placeholders"] = scrub.placeholders()
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(m, as_json, out, "\n".join(scrub.summary(m)))


def bench_general_command(
    benchmark: Annotated[
        Optional[list[Path]],
        typer.Option("--benchmark", help="a contract-5 JSONL file; repeat (default: HotpotQA dev)"),
    ] = None,
    weights: Annotated[str, typer.Option(help="comma-separated BM25 weights w (cosine's is 1)")] = "0,0.25,0.5,0.75,1",
    sd_floor: Annotated[
        str, typer.Option(help="comma-separated floors of BM25's sd (train_ranker.bm25_sd_floor); 0 = plain")
    ] = "0",
    plain_floor: Annotated[
        str,
        typer.Option(help="comma-separated sd floors for queries in plain words (train_ranker.general_plain_floor)"),
    ] = "",
    name_ramp: Annotated[float, typer.Option(help="name share at which a query keeps --sd-floor")] = 0.2,
    echo_query: Annotated[
        bool, typer.Option("--echo-query", help="prefix every candidate with the query (BM25 without evidence)")
    ] = False,
    max_queries: Annotated[int, typer.Option(help="queries per file; 0 = all")] = 0,
    domains_: Annotated[
        Optional[str],
        typer.Option(
            "--domains",
            help="day one: a folder of contract-5 files (`pai bench build-domains`) or comma-separated files; per "
            "domain cosine, BM25, hybrid, the first stage and the general order, fitted leave-one-domain-out",
        ),
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The ranker's general weights (train_ranker.general_bm25): cosine + w x BM25 beside the baselines; with
    --domains, day one: the first stage and the general order against plain vector search in every domain."""
    if domains_ is not None:
        return _day_one(domains_, max_queries, params, as_json, out)
    try:
        ws = [float(w) for w in weights.split(",")]
        floors = tuple(float(f) for f in sd_floor.split(","))
        plains = tuple(float(f) for f in plain_floor.split(",") if f.strip())
        if any(not w >= 0 for w in ws) or any(not 0 <= f < float("inf") for f in (*floors, *plains)):
            raise ValueError("--weights, --sd-floor and --plain-floor: each must be a number >= 0")
        if not 0 <= name_ramp <= 1:
            raise ValueError("--name-ramp: a share in [0, 1]")
        files = benchmark or [BENCHMARK_DIR / "hotpotqa" / "dev.jsonl"]
        benchmarks = {bench_name(str(f)): checked_items(f, max_queries) for f in files}
        if echo_query:
            benchmarks = {f"{name} (query echoed)": general_fusion.echo_query(v) for name, v in benchmarks.items()}
        with progress_bar() as bar:
            result = general_fusion.run(benchmarks, ws, get_embedder(), bar, floors, plains, name_ramp)
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit({"machine": machine(), **result}, as_json, out, general_fusion.table(result, machine()))


def _day_one(spec: str, max_queries: int, params: Path, as_json: bool, out: Path | None) -> None:
    try:
        folder = Path(spec)
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else [Path(f) for f in spec.split(",") if f.strip()]
        if not files:
            raise ValueError(f"--domains {spec}: no contract-5 files there (`pai bench build-domains` writes them)")
        sets = {f.stem: checked_items(f, max_queries) for f in files}
        rule = GeneralRule.of(load_section(params, "search", SearchParams))
        with progress_bar() as bar:
            result = day_one.run(sets, get_embedder(), rule, bar)
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit({"machine": machine(), **result}, as_json, out, day_one.table(result, machine()))


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


def build_code_command(
    out: Annotated[Path, typer.Option(help="the contract-5 JSONL to write")] = Path(
        "data/benchmarks/code-docstrings.jsonl"
    ),
    queries: Annotated[int, typer.Option(min=1, help="queries (documented functions) to sample")] = 300,
    site_packages: Annotated[
        Optional[Path], typer.Option(help="where the packages are (default: this interpreter's site-packages)")
    ] = None,
    seed: Annotated[int, typer.Option(help="which functions are sampled")] = 0,
) -> None:
    """A lexical-mismatch set from this machine: docstrings as queries for their functions' bodies (docstring
    removed), 19 distractors mined by our hybrid first stage over all pooled functions (eval/code_bench.py)."""
    root = site_packages or Path(sysconfig.get_paths()["purelib"])
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


def bench_seq_length_command(
    benchmark: Annotated[Path, typer.Option("--benchmark", help="a contract-5 JSONL file")] = Path(
        "data/benchmarks/scifact-test.jsonl"
    ),
    lengths: Annotated[
        str, typer.Option(help="comma-separated word-piece limits; the first is the reference")
    ] = "256,128",
    max_queries: Annotated[int, typer.Option(help="queries; 0 = all")] = 0,
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Can ingest embed less? Embedding speed and Recall@5 of the cosine order with passages cut at each length."""
    try:
        ls = [int(x) for x in lengths.split(",")]
        if not ls or any(not 8 <= x <= 512 for x in ls) or len(set(ls)) != len(ls):
            raise ValueError("--lengths: integers in 8..512, each once")
        items = checked_items(benchmark, max_queries)
        with progress_bar() as bar:
            task = bar.add_task(f"embed {len(items)} queries' passages at {len(ls)} lengths", total=len(ls))
            result = seq_length.run(items, get_embedder(), ls, progress=lambda: bar.advance(task))
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(result, as_json, out, seq_length.table(result))


def bench_embed_command(
    benchmark: Annotated[Path, typer.Option("--benchmark", help="a contract-5 JSONL file")] = Path(
        "data/benchmarks/scifact-test.jsonl"
    ),
    backends: Annotated[
        str, typer.Option(help="comma-separated backend[:precision] (f32 or auto); the first is the reference")
    ] = "torch:f32,openvino:f32,openvino:auto",
    max_queries: Annotated[int, typer.Option(help="queries, and their candidates as passages; 0 = all")] = 100,
    batch_size: Annotated[int, typer.Option(help="passages per forward pass")] = 32,
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The embedder's backends side by side: passages/s, query p50, cosine parity and Recall@5 vs the first."""
    try:
        specs = embed.parse_backends(backends)
        items = checked_items(benchmark, max_queries)
        with progress_bar() as bar:
            task = bar.add_task(f"embed {len(items)} queries' passages with {len(specs)} backends", total=len(specs))
            result = embed.run(items, specs, batch_size, progress=lambda: bar.advance(task))
    except (OSError, ValueError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, embed.table(result, result["machine"]))


def bench_ingest_command(
    corpus: Annotated[Path, typer.Option(help="a corpus file (JSONL records, as `pai ingest` reads)")] = (
        BENCHMARK_DIR / "scifact" / "corpus.jsonl"
    ),
    max_docs: Annotated[int, typer.Option(help="the first N documents; 0 = all")] = 0,
    kept: Annotated[
        bool, typer.Option(help="also ingest with the HNSW index kept throughout (bulk_max_chunks 0)")
    ] = True,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Bulk ingest into a fresh database beside the embedder alone on the same chunks: chunks/s and their ratio."""
    try:
        ip, sp = load_section(params, "ingest", IngestParams), load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
        docs = ingest.corpus_documents(corpus, max_docs, ip.max_file_bytes)
        result = ingest.run(docs, embedder, ip, sp, log=lambda m: console.print(m, style="dim"), kept=kept)
    except (OSError, ValueError, DatabaseError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, ingest.table(result, result["machine"]))


# The map `pai bench --help` shows: one panel per subject, one line per bench, in this order.
app.command(
    "ingest", rich_help_panel=INGEST, short_help="Bulk ingest vs the embedder alone on the same chunks: chunks/s."
)(bench_ingest_command)
app.command(
    "embed", rich_help_panel=INGEST, short_help="The embedder's backends: speed, parity with the first, Recall@5."
)(bench_embed_command)
app.command("seq-length", rich_help_panel=INGEST, short_help="Passages cut at fewer word pieces: speed and Recall@5.")(
    bench_seq_length_command
)
app.command("scrub", rich_help_panel=INGEST, short_help="The secret scrubber: recall per provider, false positives.")(
    bench_scrub_command
)
app.command("capture", rich_help_panel=INGEST, short_help="Capture's gates: precision/recall, time, the noise gate.")(
    capture.bench_capture_command
)
app.command("retrieval", rich_help_panel=INGEST, short_help="pgvector HNSW per storage type: size, latency, recall.")(
    pipeline.bench_retrieval_command
)
app.command("general", rich_help_panel=RANKING, short_help="The ranker's general weights: cosine + w x BM25.")(
    bench_general_command
)
app.command("usage", rich_help_panel=RANKING, short_help="Does the usage prior help? Recall with and without it.")(
    maintain.bench_usage_command
)
app.command("serve", rich_help_panel=SERVICE, short_help="/query latency and throughput under concurrent clients.")(
    pipeline.bench_serve_command
)
app.command("policy", rich_help_panel=SERVICE, short_help="A selector inline vs the first-stage order: /query p50.")(
    pipeline.bench_policy_command
)
app.command("swap", rich_help_panel=SERVICE, short_help="Hot-swaps under load: failures, stale versions, latency.")(
    pipeline.bench_swap_command
)
app.command(
    "memory", rich_help_panel=SERVICE, short_help="A memory of conversations (LoCoMo): evidence turns in context."
)(bench_memory.bench_memory_command)
app.command("build-code", rich_help_panel=SETS, short_help="Build the code-search set: docstring -> its function.")(
    build_code_command
)
app.command("build-man", rich_help_panel=SETS, short_help="Build the man-page set: a page's summary -> its text.")(
    build_man_command
)
app.command("build-domains", rich_help_panel=SETS, short_help="Build the day-one domain set (docs/domains.md).")(
    build_domains_command
)
