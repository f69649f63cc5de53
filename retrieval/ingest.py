"""Ingestion: files -> documents -> scrub -> chunk -> dedup -> embed -> store.

Each document is written in its own transaction, so a failure leaves every document either as it
was or fully replaced. Bad input (missing, binary, undecodable, empty, oversized) is reported as one
line and the rest of the batch goes on.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import psycopg

from . import store
from .ce_input import passage_text
from .chunking import Chunk, chunk_document
from .db import first_line
from .embed import Embedder
from .params import IngestParams, SearchParams
from .scrub import scrub, scrub_text
from .scrub import version as scrub_version
from .sources import CORPUS_SUFFIXES, Document, InputError, discover, read_documents, resolved


@dataclass
class IngestReport:
    files: int = 0
    documents_new: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    documents_deleted: int = 0
    chunks_inserted: int = 0
    chunks_kept: int = 0
    chunks_deleted: int = 0
    duplicates_skipped: int = 0
    near_linked: int = 0
    skipped_files: int = 0
    redactions: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def documents(self) -> int:
        return self.documents_new + self.documents_updated + self.documents_unchanged

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["redactions"] = dict(self.redactions)
        d["documents"] = self.documents
        d["docs_per_second"] = round(self.docs_per_second, 1)
        d["seconds"] = round(self.seconds, 2)
        return d


def document_hash(doc: Document, params: IngestParams) -> str:
    """Changes when the text or anything that shapes its chunks changes."""
    key = f"v1\x00{params.chunk_tokens}\x00{doc.kind}\x00{doc.title or ''}\x00{doc.text}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def scrub_names(doc: Document) -> Document:
    """Secrets out of a document's source and title too: they are shown as the chunk's source and
    heading. (Its text is scrubbed with the chunking, once it is known to have changed.)"""
    source, title = scrub_text(doc.source), scrub_text(doc.title)
    return doc if (source, title) == (doc.source, doc.title) else replace(doc, source=source, title=title)


def embedding_text(chunk: Chunk) -> str:
    """What is embedded: the passage text (`retrieval.ce_input.passage_text`), its heading path for context."""
    return passage_text(chunk.heading, chunk.text, chunk.parent_heading)


def ingest_paths(
    conn: psycopg.Connection,
    paths: list[Path],
    params: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    progress: Callable[[int, int], None] | None = None,
) -> IngestReport:
    """Ingest files and directories; remove what was stored for files that are gone."""
    t0 = time.perf_counter()
    report = IngestReport()
    store.ensure_hnsw(conn, search.hnsw_m, search.hnsw_ef_construction)
    files, missing, report.skipped_files = discover(paths)
    report.files = len(files)
    gone = _gone_paths(conn, paths, files, missing, report)
    sources = [s for ss in store.sources_for_paths(conn, gone).values() for s in ss]

    docs: list[Document] = []
    for f in files:
        n_errors = len(report.errors)
        try:
            file_docs = []
            for d in read_documents(f, params.max_file_bytes):
                (report.errors.append(str(d)) if isinstance(d, InputError) else file_docs.append(scrub_names(d)))
        except InputError as e:
            report.errors.append(str(e))
            continue
        docs += file_docs
        abspath = resolved(f)
        if f.suffix.lower() in CORPUS_SUFFIXES and len(report.errors) == n_errors:
            # records removed from a corpus file go too; not when some records failed to read
            now = {d.source for d in file_docs}
            sources += [s for s in store.sources_for_paths(conn, [abspath]).get(abspath, []) if s not in now]
    report.documents_deleted, report.chunks_deleted = store.delete_sources(conn, sources)

    _ingest_batches(conn, docs, params, search, embedder, report, progress)
    report.seconds = time.perf_counter() - t0
    return report


def ingest_documents(
    conn: psycopg.Connection,
    docs: list[Document],
    params: IngestParams,
    search: SearchParams,
    embedder: Embedder,
) -> IngestReport:
    """Ingest documents that come from no file (the service's webhook notes)."""
    t0 = time.perf_counter()
    report = IngestReport()
    _ingest_batches(conn, [scrub_names(d) for d in docs], params, search, embedder, report, None)
    report.seconds = time.perf_counter() - t0
    return report


def _ingest_batches(conn, docs, params, search, embedder, report, progress) -> None:
    for start in range(0, len(docs), params.batch_docs):
        _ingest_batch(conn, docs[start : start + params.batch_docs], params, search, embedder, report)
        if progress:
            progress(min(start + params.batch_docs, len(docs)), len(docs))


def _gone_paths(conn, paths: list[Path], files: list[Path], missing: list[Path], report: IngestReport) -> list[str]:
    """Stored file paths that no longer exist: under a walked folder, or named and missing."""
    here = {resolved(f) for f in files}
    gone = [q for p in paths if p.is_dir() for q in store.paths_under(conn, resolved(p)) if q not in here]
    for p in missing:
        known = list(store.sources_for_paths(conn, [resolved(p)])) + store.paths_under(conn, resolved(p))
        if known:
            gone += known
        else:
            report.errors.append(f"{p}: no such file or directory")
    return gone


def _ingest_batch(
    conn: psycopg.Connection,
    docs: list[Document],
    params: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    report: IngestReport,
) -> None:
    stored = store.document_hashes(conn, [d.source for d in docs])
    todo = []
    for d in docs:
        h = document_hash(d, params)
        if d.source in stored and stored[d.source][1] == h:
            report.documents_unchanged += 1
            continue
        scrubbed = scrub(d.text)
        report.redactions += scrubbed.counts
        chunks = chunk_document(scrubbed.text, d.kind, params.chunk_tokens, d.title)
        old = store.chunk_hashes(conn, stored[d.source][0]) if d.source in stored else {}
        todo.append((d, h, chunks, old))

    # 1. embed, in one call, every chunk this batch has not stored before (as last seen: another
    #    writer may change that before step 2, which embeds whatever is still missing)
    fresh = {c.content_hash: c for _, _, chunks, old in todo for c in chunks if c.content_hash not in old}
    vectors = dict(zip(fresh, embedder.encode_passages([embedding_text(c) for c in fresh.values()])))

    # 2. per document, in one transaction holding the document's lock: skip chunks that duplicate
    #    another document's, link near ones, write. Within a document only exact repeats are dropped:
    #    its chunks share a title, so cosine says little there.
    for d, h, chunks, _ in todo:
        try:
            _write_one(conn, d, h, chunks, vectors, params, search, embedder, report)
        except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded) as e:  # this document only: the rest goes on
            report.errors.append(f"{d.source}: not stored ({first_line(e)})")


def _write_one(
    conn,
    d: Document,
    h: str,
    chunks: list[Chunk],
    vectors: dict,
    params: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    report: IngestReport,
) -> None:
    """Concurrent writers of one source (two `pai ingest`, the watcher, the hook, the webhook) take
    turns: state is read again under the lock, and dedup only ever compares with committed chunks
    of other documents, so no writer can skip a chunk because of its own document's rows."""
    with conn.transaction():
        store.lock_source(conn, d.source)
        current = store.document_hashes(conn, [d.source]).get(d.source)
        if current and current[1] == h:  # another writer stored this very text meanwhile
            report.documents_unchanged += 1
            return
        doc_id = current[0] if current else None
        old = store.chunk_hashes(conn, doc_id) if doc_id else {}
        unique: dict[str, Chunk] = {}
        for c in chunks:
            unique.setdefault(c.content_hash, c)
        report.duplicates_skipped += len(chunks) - len(unique)
        new = [c for c in unique.values() if c.content_hash not in old]
        missing = [c for c in new if c.content_hash not in vectors]
        if missing:
            vectors.update(
                zip((c.content_hash for c in missing), embedder.encode_passages([embedding_text(c) for c in missing]))
            )
        nearest = store.nearest(conn, np.array([vectors[c.content_hash] for c in new]), doc_id, search.ef_search)
        skipped, near = set(), {}
        for c, n in zip(new, nearest):
            if n and n.score >= params.dup_threshold:
                skipped.add(c.content_hash)
            elif n and n.score >= params.near_threshold:
                near[c.content_hash] = n
        written = store.write_document(
            conn,
            source=d.source,
            path=d.path,
            content_hash=h,
            chunks=[c for c in unique.values() if c.content_hash not in skipped],
            new_embeddings=vectors,
            near=near,
            scrubbed_with=scrub_version(),
        )
    report.duplicates_skipped += len(skipped)
    report.near_linked += len(near)
    report.chunks_inserted += written.inserted
    report.chunks_kept += written.kept
    report.chunks_deleted += written.deleted
    if doc_id is None:
        report.documents_new += 1
    else:
        report.documents_updated += 1
