"""`pai lab bench ingest`, `embed`, `seq-length`, `scrub`: what ingest costs and what it keeps: bulk ingest against the
embedder alone, the embedder's backends, passages cut shorter, the secret scrubber. Thin commands over their cores
in eval/bench/ (ingest.py, embed.py, seq_length.py, scrub.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from eval.bench import embed, ingest, scrub, seq_length
from eval.items import checked_items
from retrieval.db import DatabaseError
from retrieval.embed import get_embedder
from retrieval.params import EmbedParams, IngestParams, SearchParams, load_section

from ..terminal import (
    BENCH_INGEST,
    BenchDirOpt,
    JsonOpt,
    OutOpt,
    ParamsOpt,
    _fail,
    benchmark_file,
    console,
    emit,
    judged_dir,
    machine,
    progress_bar,
)

app = typer.Typer()


@app.command(
    "ingest", rich_help_panel=BENCH_INGEST, short_help="Bulk ingest vs the embedder alone on the same chunks: chunks/s."
)
def bench_ingest_command(
    corpus: Annotated[
        Optional[Path],
        typer.Option(
            help="a corpus file (JSONL records, as `pai ingest` reads); default: scifact/corpus.jsonl in "
            "params.yaml benchmark.benchmark_dir",
            show_default=False,
        ),
    ] = None,
    max_docs: Annotated[int, typer.Option(help="the first N documents; 0 = all")] = 0,
    kept: Annotated[
        bool, typer.Option(help="also ingest with the HNSW index kept throughout (bulk_max_chunks 0)")
    ] = True,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Bulk ingest into a fresh database beside the embedder alone on the same chunks: chunks/s and their ratio."""
    corpus = judged_dir(params, None) / "scifact" / "corpus.jsonl" if corpus is None else corpus
    try:
        ip, sp = load_section(params, "ingest", IngestParams), load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
        docs = ingest.corpus_documents(corpus, max_docs, ip.max_file_bytes)
        result = ingest.run(docs, embedder, ip, sp, log=lambda m: console.print(m, style="dim"), kept=kept)
    except (OSError, ValueError, DatabaseError) as e:
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, ingest.table(result, result["machine"]))


@app.command(
    "embed", rich_help_panel=BENCH_INGEST, short_help="The embedder's backends: speed, parity with the first, Recall@5."
)
def bench_embed_command(
    benchmark: Annotated[
        Optional[Path],
        typer.Option(
            "--benchmark", help="a contract-5 JSONL file (default: the benchmark stage's, params.yaml benchmark)"
        ),
    ] = None,
    backends: Annotated[
        str, typer.Option(help="comma-separated backend[:precision] (f32 or auto); the first is the reference")
    ] = "torch:f32,openvino:f32,openvino:auto",
    max_queries: Annotated[int, typer.Option(help="queries, and their candidates as passages; 0 = all")] = 100,
    batch_size: Annotated[
        Optional[int], typer.Option(help="passages per forward pass (default: params.yaml embed.batch_size)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The embedder's backends side by side: passages/s, query p50, cosine parity and Recall@5 vs the first."""
    try:
        batch_size = load_section(params, "embed", EmbedParams).batch_size if batch_size is None else batch_size
        benchmark = benchmark_file(params, benchmark)
        specs = embed.parse_backends(backends)
        items = checked_items(benchmark, max_queries)
        with progress_bar() as bar:
            task = bar.add_task(f"embed {len(items)} queries' passages with {len(specs)} backends", total=len(specs))
            result = embed.run(items, specs, batch_size, progress=lambda: bar.advance(task))
    except (OSError, ValueError) as e:  # a ParamsError is a ValueError
        _fail(str(e))
    result["machine"] = machine()
    emit(result, as_json, out, embed.table(result, result["machine"]))


@app.command(
    "seq-length", rich_help_panel=BENCH_INGEST, short_help="Passages cut at fewer word pieces: speed and Recall@5."
)
def bench_seq_length_command(
    benchmark: Annotated[
        Optional[Path],
        typer.Option(
            "--benchmark", help="a contract-5 JSONL file (default: the benchmark stage's, params.yaml benchmark)"
        ),
    ] = None,
    lengths: Annotated[
        str, typer.Option(help="comma-separated word-piece limits; the first is the reference")
    ] = "256,128",
    max_queries: Annotated[int, typer.Option(help="queries; 0 = all")] = 0,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Can ingest embed less? Embedding speed and Recall@5 of the cosine order with passages cut at each length."""
    try:
        ls = [int(x) for x in lengths.split(",")]
        if not ls or any(not 8 <= x <= 512 for x in ls) or len(set(ls)) != len(ls):
            raise ValueError("--lengths: integers in 8..512, each once")
        benchmark = benchmark_file(params, benchmark)
        items = checked_items(benchmark, max_queries)
        with progress_bar() as bar:
            task = bar.add_task(f"embed {len(items)} queries' passages at {len(ls)} lengths", total=len(ls))
            result = seq_length.run(items, get_embedder(), ls, progress=lambda: bar.advance(task))
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(result, as_json, out, seq_length.table(result))


@app.command(
    "scrub", rich_help_panel=BENCH_INGEST, short_help="The secret scrubber: recall per provider, false positives."
)
def bench_scrub_command(
    benchmark_dir: BenchDirOpt = None,
    repo: Annotated[Path, typer.Option(help="the repository whose .py files are the code sample")] = Path("."),
    providers: Annotated[Path, typer.Option(help="the provider corpus (JSONL of text + secret)")] = Path(
        "tests/data/provider_corpus.jsonl"
    ),
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """The secret scrubber: recall on a provider corpus (with and without the rule set), the mechanism corpus by
    source and mechanism, placeholders redacted, and false positives: tokens it changes in SciFact's abstracts,
    lines in this repository's code."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        m = scrub.measure(benchmark_dir / "scifact" / "corpus.jsonl", repo.resolve())
        m["providers"] = scrub.providers(providers)
        m["mechanisms"] = scrub.mechanisms(providers)
        m["placeholders"] = scrub.placeholders()
    except (OSError, ValueError) as e:
        _fail(str(e))
    emit(m, as_json, out, "\n".join(scrub.summary(m)))
