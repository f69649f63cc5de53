"""The `pai` commands that measure a model offline: `bench ce` (cross-encoder latency), `sweep ce`
(which cross-encoder size to serve), `ablation` (which parts of its fusion help) and `gpu-smoke` (the
train stage's GPU path on random weights). Registered onto the one `pai` app by cli/main.py.

Flags mean the same in every command: `--json` prints JSON to stdout, `--out FILE` writes it to a
file, `--benchmark-dir` is the shared benchmark folder, `--max-queries` caps the queries."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path
from typing import Annotated, Optional

import typer

from eval import bench_ce, bench_embed, bench_ingest, code_bench, general_fusion, man_bench, scrub_bench, seq_length
from eval.evaluate import bench_name, checked_items
from retrieval.db import DatabaseError
from retrieval.embed import get_embedder
from retrieval.params import BENCHMARK_DIR, EmbedParams, IngestParams, SearchParams, load_section
from training import gpu_smoke

from . import ce_sweep, fusion_ablation
from .terminal import BenchDirOpt, JsonOpt, OutOpt, ParamsOpt, _fail, console, emit, machine, progress_bar


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    bench_app.command("ce")(bench_ce_command)
    bench_app.command("scrub")(bench_scrub_command)
    bench_app.command("general")(bench_general_command)
    bench_app.command("seq-length")(bench_seq_length_command)
    bench_app.command("embed")(bench_embed_command)
    bench_app.command("ingest")(bench_ingest_command)
    bench_app.command("build-code")(build_code_command)
    bench_app.command("build-man")(build_man_command)
    sweep_app = typer.Typer(no_args_is_help=True, help="Train and measure several model sizes side by side.")
    sweep_app.command("ce")(sweep_ce_command)
    app.add_typer(sweep_app, name="sweep")
    app.command("ablation")(ablation_command)
    app.command("gpu-smoke")(gpu_smoke_command)


def bench_ce_command(
    model: Annotated[
        Optional[list[Path]], typer.Option("--model", help="a train_ce output folder; repeat to compare")
    ] = None,
    dtypes: Annotated[
        str, typer.Option(help="comma-separated precisions to time each model in (float32, bfloat16, auto)")
    ] = "float32,auto",
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    max_queries: Annotated[int, typer.Option(help="candidate sets (queries) per dataset")] = 30,
    repeats: Annotated[int, typer.Option(help="timed passes over the sets")] = 3,
    threads: Annotated[Optional[int], typer.Option(help="torch threads (default: torch's, one per core)")] = None,
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Latency of the cross-encoder selector: one answer over 20 real candidates (HotpotQA, SciFact)."""
    try:
        rows = bench_ce.run(
            model or [Path("models/cross_encoder")], dtypes.split(","), benchmark_dir, max_queries, repeats, threads
        )
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(rows, as_json, out, bench_ce.table(rows))


def bench_scrub_command(
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    repo: Annotated[Path, typer.Option(help="the repository whose .py files are the code sample")] = Path("."),
    providers: Annotated[Path, typer.Option(help="the provider corpus (JSONL of text + secret)")] = Path(
        "tests/data/provider_corpus.jsonl"
    ),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The secret scrubber: recall on a provider corpus (with and without the rule set), placeholders redacted,
    and false positives: tokens it changes in SciFact's abstracts, lines in this repository's code."""
    try:
        m = scrub_bench.measure(benchmark_dir / "scifact" / "corpus.jsonl", repo.resolve())
        m["providers"] = scrub_bench.providers(providers)
        m["placeholders"] = scrub_bench.placeholders()
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(m, as_json, out, "\n".join(scrub_bench.summary(m)))


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
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The ranker's general weights (train_ranker.general_bm25): cosine + w x BM25 beside the baselines."""
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
        specs = bench_embed.parse_backends(backends)
        items = checked_items(benchmark, max_queries)
        with progress_bar() as bar:
            task = bar.add_task(f"embed {len(items)} queries' passages with {len(specs)} backends", total=len(specs))
            result = bench_embed.run(items, specs, batch_size, progress=lambda: bar.advance(task))
    except (OSError, ValueError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, bench_embed.table(result, result["machine"]))


def bench_ingest_command(
    corpus: Annotated[Path, typer.Option(help="a corpus file (JSONL records, as `pai ingest` reads)")] = (
        BENCHMARK_DIR / "scifact" / "corpus.jsonl"
    ),
    max_docs: Annotated[int, typer.Option(help="the first N documents; 0 = all")] = 0,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Bulk ingest into a fresh database beside the embedder alone on the same chunks: chunks/s and their ratio."""
    try:
        ip, sp = load_section(params, "ingest", IngestParams), load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
        docs = bench_ingest.corpus_documents(corpus, max_docs, ip.max_file_bytes)
        result = bench_ingest.run(docs, embedder, ip, sp, log=lambda m: console.print(m, style="dim"))
    except (OSError, ValueError, DatabaseError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, bench_ingest.table(result, result["machine"]))


def sweep_ce_command(
    config: Annotated[list[str], typer.Option("--config", help="LAYERSxMAX_LENGTH, e.g. 3x64; repeat")],
    dtypes: Annotated[str, typer.Option(help="comma-separated precisions (float32, bfloat16, auto)")] = "auto",
    models_dir: Annotated[Path, typer.Option(help="one train_ce folder per config under here")] = Path(
        "models/ce_sweep"
    ),
    benchmark_dir: BenchDirOpt = BENCHMARK_DIR,
    latency_queries: Annotated[int, typer.Option(help="candidate sets per dataset for the latency")] = 30,
    max_queries: Annotated[int, typer.Option(help="queries per benchmark for the recall")] = 100,
    retrain: Annotated[bool, typer.Option("--retrain", help="train even where a matching folder exists")] = False,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Train the cross-encoder once per size; each timed in every precision and scored with its fusion variants."""
    try:
        configs = [ce_sweep.parse_config(c) for c in config]
        rows = ce_sweep.sweep(
            configs,
            models_dir,
            dtypes.split(","),
            benchmark_dir,
            latency_queries,
            max_queries,
            str(params),
            retrain=retrain,
            log=console.print,
        )
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(rows, as_json, out, ce_sweep.table(rows))


def ablation_command(
    model_dir: Annotated[Path, typer.Option(help="a train_ce output folder")] = Path("models/cross_encoder"),
    max_queries: Annotated[int, typer.Option(help="queries per benchmark")] = 100,
    dtype: Annotated[
        Optional[str], typer.Option(help="float32 | bfloat16 | auto (default: the model's serve_dtype)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Which parts of the cross-encoder's fusion help: Recall@5 of its variants side by side."""
    try:
        result = fusion_ablation.run(model_dir, max_queries, str(params), dtype=dtype)
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(result, as_json, out, fusion_ablation.table(result))


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
