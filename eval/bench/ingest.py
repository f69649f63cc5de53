"""Bulk ingest against the embedder's own speed (`pai lab bench ingest`), side by side in one run on one machine.

The corpus is read, scrubbed and chunked as ingest does, and the chunks' texts are embedded once by the embedder
alone (no vector cache, no database): the raw rate. Then the same corpus is ingested into a fresh database with an
empty vector cache: the ingest rate. Their ratio is what the database work (dedup, inserts, indexes, full text)
costs beyond the embedding; ingest pipelines it against the embedding of the next batch. A fresh database is a
first load, which builds the HNSW index after the vectors are in (`retrieval.corpus.bulk`); `kept=True` ingests
once more with the index kept throughout (`ingest.bulk_max_chunks: 0`, what a store that has chunks does), and
twice with the vectors cached (no embedding: a GPU embedder's case), index after and index kept.

    pai lab bench ingest --corpus data/judged/scifact/corpus.jsonl
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from retrieval.chunking import chunk_document
from retrieval.corpus.ingest import embedding_text, ingest_documents, scrub_names
from retrieval.corpus.sources import Document, InputError, read_documents
from retrieval.db import connect, pai_home, scratch_database
from retrieval.embed import Embedder
from retrieval.params import IngestParams, SearchParams
from retrieval.scrub import scrub


def corpus_documents(path: Path, max_docs: int, max_bytes: int) -> list[Document]:
    docs = []
    for d in read_documents(path, max_bytes):
        if isinstance(d, InputError):
            raise ValueError(str(d))
        docs.append(d)
        if max_docs and len(docs) >= max_docs:
            break
    if not docs:
        raise ValueError(f"{path}: no documents")
    return docs


@contextmanager
def empty_vector_cache():
    """$PAI_HOME pointed at a fresh folder (the converted model linked in), so every passage is embedded."""
    models = (pai_home() / "models").resolve()
    before = os.environ.get("PAI_HOME")
    with tempfile.TemporaryDirectory(prefix="pai-bench-ingest-") as home:
        if models.is_dir():
            (Path(home) / "models").symlink_to(models)
        os.environ["PAI_HOME"] = home
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PAI_HOME", None)
            else:
                os.environ["PAI_HOME"] = before


def run(
    docs: list[Document],
    embedder: Embedder,
    params: IngestParams,
    search: SearchParams,
    log: Callable[[str], None] = print,
    kept: bool = True,
) -> dict:
    scrub("warm up: the rule sets load once")
    t0 = time.perf_counter()
    docs = [scrub_names(d) for d in docs]
    scrubbed = [scrub(d.text).text for d in docs]
    scrub_s = time.perf_counter() - t0  # one core: what ingest's main thread spends scrubbing, names and texts
    window = max(getattr(params, "embed_docs", 0), params.batch_docs)  # a revision before embed_docs: per batch
    batches = [  # the chunk texts as ingest embeds them: one call per window of `embed_docs` documents
        list(
            {
                c.content_hash: embedding_text(c)
                for d, text in zip(docs[i : i + window], scrubbed[i : i + window])
                for c in chunk_document(text, d.kind, params.chunk_tokens, d.title)
            }.values()
        )
        for i in range(0, len(docs), window)
    ]
    texts = list(dict.fromkeys(t for b in batches for t in b))
    embedder.encode(texts[:32])  # warm up
    log(f"embedding {len(texts):,} chunk texts of {len(docs):,} documents, the embedder alone")
    t0 = time.perf_counter()
    embedder.encode(texts)
    raw_s = time.perf_counter() - t0
    log(f"ingesting them into a fresh database, an empty vector cache ({raw_s:.0f} s embedding alone)")
    per_batch_s = None
    if kept:
        log(f"the embedder alone again, one call per window of {window} documents, as ingest calls it")
        t0 = time.perf_counter()
        for b in batches:
            embedder.encode(b)
        per_batch_s = time.perf_counter() - t0
    no_index = replace(params, bulk_max_chunks=0)
    with empty_vector_cache():
        first = _ingest(docs, embedder, params, search)
        if kept:  # the vectors cached now: what is left is scrubbing, chunking, dedup and the database
            log("again, the vectors cached (a GPU embedder's case): index after, then index kept")
            warm = {"index_after_s": _ingest(docs, embedder, params, search)["ingest_s"]}
            warm["index_kept_s"] = _ingest(docs, embedder, no_index, search)["ingest_s"]
    embedded = len(texts)
    result = {
        "documents": len(docs),
        "chunks": embedded,
        "batch_docs": params.batch_docs,
        "embed_docs": window,
        "embedder": embedder.describe(),
        "embed_only_s": round(raw_s, 1),
        "embed_chunks_per_s": round(embedded / raw_s, 1),
        "embed_per_batch_s": round(per_batch_s, 1) if per_batch_s else None,
        "scrub_s": round(scrub_s, 1),
        **first,
        "ingest_s": round(first["ingest_s"], 1),
        "ingest_chunks_per_s": round(embedded / first["ingest_s"], 1),
        "ratio": round(raw_s / first["ingest_s"], 3),
    }
    if kept:
        log("once more from an empty vector cache, the HNSW index kept throughout (ingest.bulk_max_chunks: 0)")
        with empty_vector_cache():
            usual = _ingest(docs, embedder, no_index, search)
        result["index_kept"] = usual | {
            "ingest_s": round(usual["ingest_s"], 1),
            "ingest_chunks_per_s": round(embedded / usual["ingest_s"], 1),
            "ratio": round(raw_s / usual["ingest_s"], 3),
        }
        result["vectors_cached"] = {k: round(v, 1) for k, v in warm.items()} | {
            "speedup": round(warm["index_kept_s"] / warm["index_after_s"], 2)
        }
    return result


def _ingest(docs: list[Document], embedder: Embedder, params: IngestParams, search: SearchParams) -> dict:
    with scratch_database("pai_bench_ingest") as url, connect(url) as conn:
        t0 = time.perf_counter()
        report = ingest_documents(conn, docs, params, search, embedder)
        ingest_s = time.perf_counter() - t0
        (stored,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return {
        "ingest_s": ingest_s,
        "index_deferred": report.index_deferred,
        "chunks_stored": stored,
        "duplicates_skipped": report.duplicates_skipped,
        "near_linked": report.near_linked,
        "errors": report.errors,
    }


def table(result: dict, machine: str):
    from rich.table import Table

    t = Table(
        title=f"bulk ingest vs the embedder alone on {machine}: {result['documents']:,} documents, "
        f"{result['chunks']:,} chunks ({result['embedder']}, embedded {result.get('embed_docs', result['batch_docs'])} "
        f"documents at a time, written {result['batch_docs']} per transaction)"
    )
    for col in ("", "seconds", "chunks/s", "share of the embedder's rate"):
        t.add_column(col, justify="right")
    t.add_row("embedder alone", f"{result['embed_only_s']:.1f}", f"{result['embed_chunks_per_s']:.1f}", "1.00")
    t.add_row(
        "ingest (scrub, chunk, embed, dedup, write)"
        + (": first load, index after" if result["index_deferred"] else ""),
        f"{result['ingest_s']:.1f}",
        f"{result['ingest_chunks_per_s']:.1f}",
        f"{result['ratio']:.2f}",
    )
    if k := result.get("index_kept"):
        t.add_row(
            "ingest, the HNSW index kept throughout",
            f"{k['ingest_s']:.1f}",
            f"{k['ingest_chunks_per_s']:.1f}",
            f"{k['ratio']:.2f}",
        )
    if w := result.get("vectors_cached"):
        for name, key in (("index after", "index_after_s"), ("index kept throughout", "index_kept_s")):
            t.add_row(
                f"vectors cached (no embedding), {name}", f"{w[key]:.1f}", f"{result['chunks'] / w[key]:.1f}", "-"
            )
    return t
