"""Ingestion: files -> documents -> scrub -> chunk -> dedup -> embed -> store.

A batch of documents is written in one transaction (one per document where the batch fails), so a
failure leaves every document either as it was or fully replaced. Bad input (missing, binary, undecodable,
empty, oversized) is reported as one line and the rest of the batch goes on. Dedup: retrieval/corpus/dedup.py.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import psycopg

from ..chunking import Chunk, chunk_document
from ..contracts.passage import passage_text
from ..db import first_line
from ..dialogue import chunk_conversation
from ..embed import Embedder
from ..params import IngestParams, SearchParams
from ..scopes import DEFAULT
from ..scrub import scrub, scrub_text
from ..scrub import version as scrub_version
from . import bulk, store
from .dedup import IDENTICAL_MIN_COSINE, dedup, duplicate_key
from .sources import CORPUS_SUFFIXES, Document, InputError, discover, resolved
from .transcripts import read_any


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
    index_deferred: bool = False  # a first load: the HNSW index was built after the vectors were in (`bulk`)

    @property
    def documents(self) -> int:
        return self.documents_new + self.documents_updated + self.documents_unchanged

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0

    def add(self, other: IngestReport) -> None:
        """Count `other`'s documents, chunks, redactions and errors here too."""
        for name, value in vars(other).items():
            if name not in ("files", "skipped_files", "seconds", "index_deferred"):
                setattr(self, name, getattr(self, name) + value)

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
    if doc.kind == "conversation":  # only a conversation's chunks depend on conversation_window
        key += f"\x00{params.conversation_window}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def scrub_names(doc: Document) -> Document:
    """Secrets out of a document's source and title too: they are shown as the chunk's source and
    heading. (Its text is scrubbed with the chunking, once it is known to have changed.)"""
    source, title = scrub_text(doc.source), scrub_text(doc.title)
    return doc if (source, title) == (doc.source, doc.title) else replace(doc, source=source, title=title)


def embedding_text(chunk: Chunk) -> str:
    """What is embedded: the passage text (`retrieval.contracts.passage.passage_text`), its heading path for context."""
    return passage_text(chunk.heading, chunk.text, chunk.parent_heading)


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

    def write(todo: list[tuple], ready: Future, start: int, end: int) -> None:
        vectors = ready.result()
        for i in range(0, len(todo), params.batch_docs):
            _write(conn, todo[i : i + params.batch_docs], vectors, params, search, embedder, report, load.run, scope)
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


def _plan(conn: psycopg.Connection, docs: list[Document], params, report: IngestReport, scope: str) -> list[tuple]:
    """The documents whose text changed, scrubbed and chunked, with the chunk hashes stored for them (as last seen:
    another writer may change that before they are written, which embeds whatever is still missing)."""
    stored = store.document_hashes(conn, [d.source for d in docs], scope)
    old = store.chunk_hashes_of(conn, [i for i, _ in stored.values()])
    todo = []
    for d in docs:
        h = document_hash(d, params)
        if d.source in stored and stored[d.source][1] == h:
            report.documents_unchanged += 1
            continue
        scrubbed = scrub(d.text)
        report.redactions += scrubbed.counts
        chunks = chunks_of(scrubbed.text, d.kind, params, d.title)
        todo.append((d, h, chunks, old[stored[d.source][0]] if d.source in stored else {}))
    return todo


def chunks_of(text: str, kind: str, params: IngestParams, title: str | None = None) -> list[Chunk]:
    """A document's chunks: a conversation in windows of turns (`retrieval.dialogue`), anything else by structure."""
    if kind == "conversation":
        return chunk_conversation(text, params.conversation_window, params.chunk_tokens, title)
    return chunk_document(text, kind, params.chunk_tokens, title)


def _embed(todo: list[tuple], embedder: Embedder) -> dict:
    """content hash -> vector for every chunk not stored before, in one call."""
    fresh = {c.content_hash: c for _, _, chunks, old in todo for c in chunks if c.content_hash not in old}
    return dict(zip(fresh, embedder.encode_passages([embedding_text(c) for c in fresh.values()])))


def _write(conn, todo: list[tuple], vectors: dict, params, search, embedder, report, run, scope: str) -> None:
    """The batch in one transaction; where it fails (a document the database refuses, a source twice in the
    batch, a lock cycle with another writer), one transaction per document, so the rest goes on."""
    if not todo:
        return
    if len({d.source for d, *_ in todo}) == len(todo):
        try:
            report.add(_write_batch(conn, todo, vectors, params, search, embedder, run, scope))
            return
        except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded, psycopg.errors.DeadlockDetected):
            pass
    for item in todo:
        try:
            report.add(_write_batch(conn, [item], vectors, params, search, embedder, run, scope))
        except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded) as e:  # this document only
            source = item[0].source
            report.errors.append(
                f"{source if len(source) <= 200 else source[:200] + '…'}: not stored ({first_line(e)})"
            )


def _write_batch(
    conn,
    todo,
    vectors: dict,
    params: IngestParams,
    search: SearchParams,
    embedder,
    run: bulk.RunIndex | None,
    scope: str,
) -> IngestReport:
    """Write documents in one transaction that holds each one's lock. Concurrent writers of one source (two
    `pai ingest`, the watcher, the hook, the webhook) take turns: state is read again under the locks, and dedup
    compares only with committed chunks of other documents (HNSW, after this batch's stale chunks are gone) and
    with the chunks this batch writes for its earlier documents (exactly, in memory), so no writer can skip a
    chunk because of its own document's rows. Only exact duplicates are dropped (`dedup.duplicate_key`), within a
    document as across documents; near ones are kept, linked across documents only (a document's chunks share a
    title, so cosine says little there)."""
    r = IngestReport()
    with conn.transaction():
        store.lock_sources(conn, [d.source for d, *_ in todo])
        current = store.document_hashes(conn, [d.source for d, *_ in todo], scope)
        plans = []
        keys: dict[tuple[int, str], str] = {}  # (plan, chunk hash) -> its duplicate key, computed once
        for d, h, chunks, _ in todo:
            if d.source in current and current[d.source][1] == h:  # another writer stored this very text meanwhile
                r.documents_unchanged += 1
                continue
            unique: dict[str, Chunk] = {}
            for c in chunks:
                unique.setdefault(duplicate_key(c.parent_heading, c.heading, c.text, d.kind), c)
            r.duplicates_skipped += len(chunks) - len(unique)
            keys.update(((len(plans), c.content_hash), key) for key, c in unique.items())
            plans.append((d, h, current.get(d.source, (None,))[0], list(unique.values())))
        existing = [doc_id for *_, doc_id, _ in plans if doc_id]
        old = store.chunk_hashes_of(conn, existing)
        r.chunks_deleted += store.delete_chunks_except(
            conn, {i: [c.content_hash for c in plans_unique] for *_, i, plans_unique in plans if i}
        )
        new = [
            (k, c)
            for k, (*_, doc_id, unique) in enumerate(plans)
            for c in unique
            if c.content_hash not in old.get(doc_id, {})
        ]
        missing = {c.content_hash: c for _, c in new if c.content_hash not in vectors}
        if missing:
            vectors.update(zip(missing, embedder.encode_passages([embedding_text(c) for c in missing.values()])))
        matrix = np.array([vectors[c.content_hash] for _, c in new], dtype=np.float32).reshape(
            len(new), -1 if new else 0
        )
        in_store = bulk.nearest(conn, run, matrix, [plans[k][2] for k, _ in new], search.ef_search, scope)
        twins = {n.chunk_id for n in in_store if n and n.score >= IDENTICAL_MIN_COSINE}
        new_keys = [keys[(k, c.content_hash)] for k, c in new]
        skipped, near = dedup(new, new_keys, matrix, in_store, store.chunk_texts(conn, sorted(twins)), plans, params)
        writes = [
            store.DocumentWrite(
                d.source,
                d.path,
                h,
                [c for c in unique if (k, c.content_hash) not in skipped],
                near.get(k, {}),
                scrub_version(),
                d.written,
                scope,
            )
            for k, (d, h, _, unique) in enumerate(plans)
        ]
        written = store.write_documents(conn, writes, vectors)
    if run is not None:  # committed: later batches compare with these chunks
        run.add_written(written, vectors)
    r.duplicates_skipped += len(skipped)
    r.near_linked += sum(len(n) for n in near.values())
    for (*_, doc_id, _), counts in zip(plans, written):
        r.chunks_inserted += counts.inserted
        r.chunks_kept += counts.kept
        r.chunks_deleted += counts.deleted
        r.documents_new += doc_id is None
        r.documents_updated += doc_id is not None
    return r
