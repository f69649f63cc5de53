"""Ingestion: files -> documents -> scrub -> chunk -> dedup -> embed -> store.

A batch of documents is written in one transaction (one per document where the batch fails), so a failure leaves
every document either as it was or fully replaced: retrieval/corpus/batch.py. Bad input (missing, binary,
undecodable, empty, oversized) is reported as one line and the rest of the batch goes on. Dedup:
retrieval/corpus/dedup.py.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import psycopg

from ..chunking import Chunk, chunk_document
from ..dialogue import chunk_conversation
from ..embed import Embedder
from ..params import IngestParams, SearchParams
from ..scopes import DEFAULT
from ..scrub import scrub, scrub_text
from ..scrub import version as scrub_version
from . import batch, bulk, store
from .batch import Planned, embedding_text
from .report import IngestReport
from .sources import CORPUS_SUFFIXES, Document, InputError, discover, resolved
from .transcripts import read_any


def document_hash(doc: Document, params: IngestParams) -> str:
    """Changes when the text or anything that shapes its chunks changes."""
    key = f"v1\x00{params.chunk_tokens}\x00{doc.kind}\x00{doc.title or ''}\x00{doc.text}"
    if doc.kind == "conversation":  # only a conversation's chunks depend on conversation_window
        key += f"\x00{params.conversation_window}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def scrub_names(doc: Document) -> Document:
    """Secrets out of a document's source and title too: they are shown as the chunk's source and
    heading. (Its text is scrubbed with the chunking, once it is known to have changed.)"""
    source, title = scrub_text(doc.source), scrub_text(doc.title)
    return doc if (source, title) == (doc.source, doc.title) else replace(doc, source=source, title=title)


def ingest_paths(
    conn: psycopg.Connection,
    paths: list[Path],
    params: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    progress: Callable[[int, int], None] | None = None,
    scope: str = DEFAULT,
) -> IngestReport:
    """Ingest files and directories into `scope`; remove what was stored there for files that are gone."""
    t0 = time.perf_counter()
    report = IngestReport()
    bulk.ensure_indexes(conn, search)
    files, missing, report.skipped_files = discover(paths)
    report.files = len(files)
    gone = _gone_paths(conn, paths, files, missing, report, scope)
    sources = [s for ss in store.sources_for_paths(conn, gone, scope).values() for s in ss]

    docs: list[Document] = []
    for f in files:
        n_errors = len(report.errors)
        try:
            file_docs = []
            for d in read_any(f, params.max_file_bytes):
                (report.errors.append(str(d)) if isinstance(d, InputError) else file_docs.append(scrub_names(d)))
        except InputError as e:
            report.errors.append(str(e))
            continue
        docs += file_docs
        abspath = resolved(f)
        if f.suffix.lower() in CORPUS_SUFFIXES and len(report.errors) == n_errors:
            # records removed from a corpus file go too; not when some records failed to read
            now = {d.source for d in file_docs}
            sources += [s for s in store.sources_for_paths(conn, [abspath], scope).get(abspath, []) if s not in now]
    report.documents_deleted, report.chunks_deleted = store.delete_sources(conn, sources, scope)

    _ingest_batches(conn, docs, params, search, embedder, report, progress, scope)
    report.seconds = time.perf_counter() - t0
    return report


def ingest_documents(
    conn: psycopg.Connection,
    docs: list[Document],
    params: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    scope: str = DEFAULT,
) -> IngestReport:
    """Ingest documents that come from no file (the service's webhook notes) into `scope`."""
    t0 = time.perf_counter()
    report = IngestReport()
    _ingest_batches(conn, [scrub_names(d) for d in docs], params, search, embedder, report, None, scope)
    report.seconds = time.perf_counter() - t0
    return report


def _ingest_batches(conn, docs, params, search, embedder, report, progress, scope: str) -> None:
    """Windows of `ingest.embed_docs` documents embedded in one call (passages sorted by length together pad little),
    written `ingest.batch_docs` per transaction; while one window is written the next is embedded in a worker thread
    (the embedder releases the GIL). A first load into an empty store builds its indexes at the end (`bulk`)."""

    def write(todo: list[Planned], ready: Future, start: int, end: int) -> None:
        vectors = ready.result()
        for i in range(0, len(todo), params.batch_docs):
            batch.write(
                conn, todo[i : i + params.batch_docs], vectors, params, search, embedder, report, load.run, scope
            )
            load.written()
            if progress:  # documents of the window, in proportion to the changed ones written
                progress(start + (end - start) * min(i + params.batch_docs, len(todo)) // len(todo), len(docs))
        if progress and not todo:  # every document of the window unchanged
            progress(end, len(docs))

    with (
        bulk.FirstLoad(conn, len(docs), params, search) as load,
        ThreadPoolExecutor(1, thread_name_prefix="embed") as pool,
    ):
        report.index_deferred = load.run is not None
        pending = None
        for start in range(0, len(docs), params.embed_docs):
            todo = _plan(conn, docs[start : start + params.embed_docs], params, report, scope)
            ready = pool.submit(_embed, todo, embedder)
            if pending:
                write(*pending)
            pending = (todo, ready, start, min(start + params.embed_docs, len(docs)))
        if pending:
            write(*pending)


def _gone_paths(conn, paths, files: list[Path], missing: list[Path], report: IngestReport, scope: str) -> list[str]:
    """Stored file paths of `scope` that no longer exist: under a walked folder, or named and missing."""
    here = {resolved(f) for f in files}
    gone = [q for p in paths if p.is_dir() for q in store.paths_under(conn, resolved(p), scope) if q not in here]
    for p in missing:
        known = list(store.sources_for_paths(conn, [resolved(p)], scope)) + store.paths_under(conn, resolved(p), scope)
        if known:
            gone += known
        else:
            report.errors.append(f"{p}: no such file or directory")
    return gone


def _plan(conn: psycopg.Connection, docs: list[Document], params, report: IngestReport, scope: str) -> list[Planned]:
    """The documents whose text changed, scrubbed and chunked, with the chunk hashes stored for them (as last seen:
    another writer may change that before they are written, which embeds whatever is still missing)."""
    stored = store.document_hashes(conn, [d.source for d in docs], scope)
    old = store.chunk_hashes_of(conn, [i for i, _ in stored.values()])
    todo = []
    for d in docs:
        h = document_hash(d, params)
        doc_id, stored_hash = stored.get(d.source, (None, None))
        if stored_hash == h:
            report.documents_unchanged += 1
            continue
        scrubbed = scrub(d.text)
        report.redactions += scrubbed.counts
        chunks = chunks_of(scrubbed.text, d.kind, params, d.title)
        stored_chunks = old[doc_id] if doc_id is not None else {}
        todo.append(Planned(doc=d, hash=h, chunks=chunks, stored=stored_chunks, scrubbed_with=scrub_version()))
    return todo


def chunks_of(text: str, kind: str, params: IngestParams, title: str | None = None) -> list[Chunk]:
    """A document's chunks: a conversation in windows of turns (`retrieval.dialogue`), anything else by structure."""
    if kind == "conversation":
        return chunk_conversation(text, params.conversation_window, params.chunk_tokens, title)
    return chunk_document(text, kind, params.chunk_tokens, title)


def _embed(todo: list[Planned], embedder: Embedder) -> dict:
    """content hash -> vector for every chunk not stored before, in one call."""
    fresh = {c.content_hash: c for p in todo for c in p.chunks if c.content_hash not in p.stored}
    return dict(zip(fresh, embedder.encode_passages([embedding_text(c) for c in fresh.values()])))
