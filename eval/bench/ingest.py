"""Bulk ingest against the embedder's own speed (`pai bench ingest`), side by side in one run on one machine.

The corpus is read, scrubbed and chunked as ingest does, and the chunks' texts are embedded once by the embedder
alone (no vector cache, no database): the raw rate. Then the same corpus is ingested into a fresh database with an
empty vector cache: the ingest rate. Their ratio is what the database work (dedup, inserts, indexes, full text)
costs beyond the embedding; ingest pipelines it against the embedding of the next batch.

    pai bench ingest --corpus ../shared/benchmark/scifact/corpus.jsonl
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
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
) -> dict:
    docs = [scrub_names(d) for d in docs]
    texts = list(
        {
            c.content_hash: embedding_text(c)
            for d in docs
            for c in chunk_document(scrub(d.text).text, d.kind, params.chunk_tokens, d.title)
        }.values()
    )
    embedder.encode(texts[:32])  # warm up
    log(f"embedding {len(texts):,} chunk texts of {len(docs):,} documents, the embedder alone")
    t0 = time.perf_counter()
    embedder.encode(texts)
    raw_s = time.perf_counter() - t0
    log(f"ingesting them into a fresh database, an empty vector cache ({raw_s:.0f} s embedding alone)")
    with scratch_database("pai_bench_ingest") as url, connect(url) as conn, empty_vector_cache():
        t0 = time.perf_counter()
        report = ingest_documents(conn, docs, params, search, embedder)
        ingest_s = time.perf_counter() - t0
        (stored,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    embedded = len(texts)
    raw_rate, ingest_rate = embedded / raw_s, embedded / ingest_s
    return {
        "documents": len(docs),
        "chunks": embedded,
        "chunks_stored": stored,
        "duplicates_skipped": report.duplicates_skipped,
        "batch_docs": params.batch_docs,
        "embedder": embedder.describe(),
        "embed_only_s": round(raw_s, 1),
        "ingest_s": round(ingest_s, 1),
        "embed_chunks_per_s": round(raw_rate, 1),
        "ingest_chunks_per_s": round(ingest_rate, 1),
        "ratio": round(ingest_rate / raw_rate, 3),
        "errors": report.errors,
    }


def table(result: dict, machine: str):
    from rich.table import Table

    t = Table(
        title=f"bulk ingest vs the embedder alone on {machine}: {result['documents']:,} documents, "
        f"{result['chunks']:,} chunks ({result['embedder']}, batches of {result['batch_docs']} documents)"
    )
    for col in ("", "seconds", "chunks/s", "share of the embedder's rate"):
        t.add_column(col, justify="right")
    t.add_row("embedder alone", f"{result['embed_only_s']:.1f}", f"{result['embed_chunks_per_s']:.1f}", "1.00")
    t.add_row(
        "ingest (scrub, chunk, embed, dedup, write)",
        f"{result['ingest_s']:.1f}",
        f"{result['ingest_chunks_per_s']:.1f}",
        f"{result['ratio']:.2f}",
    )
    return t
