"""A batch of planned documents written in one transaction that holds each one's lock (`write`); where it fails,
one transaction per document, so the rest goes on. Ingest (retrieval/corpus/ingest.py) plans the batches and embeds
their new chunks ahead; which are duplicates or near ones: retrieval/corpus/dedup.py."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import psycopg

from ..chunking import Chunk
from ..contracts.passage import passage_text
from ..db import first_line
from ..params import IngestParams, SearchParams
from . import bulk, store
from .dedup import IDENTICAL_MIN_COSINE, NewChunk, dedup, duplicate_key
from .report import IngestReport
from .sources import Document


class Planned(NamedTuple):
    """A document whose text changed (ingest's `_plan`), scrubbed and chunked, with its chunks stored as last seen."""

    doc: Document
    hash: str  # its `ingest.document_hash`
    chunks: list[Chunk]
    stored: dict[str, int]  # content hash -> chunk id of the chunks stored for it ({} for a new document)
    scrubbed_with: str  # the version of the scrubber that scrubbed its text (`retrieval.scrub.version`)


class Plan(NamedTuple):
    """A planned document as `_write_batch` writes it, read again under its lock."""

    doc: Document
    hash: str
    scrubbed_with: str
    doc_id: int | None  # its stored document (None: a new one)
    chunks: list[Chunk]  # its chunks, exact duplicates within it dropped


def embedding_text(chunk: Chunk) -> str:
    """What is embedded: the passage text (`retrieval.contracts.passage.passage_text`), its heading path for context."""
    return passage_text(chunk.heading, chunk.text, chunk.parent_heading)


def write(conn, todo: list[Planned], vectors: dict, params, search, embedder, report, run, scope: str) -> None:
    """`todo` in one transaction; where it fails (a document the database refuses, a source twice in the
    batch, a lock cycle with another writer), one transaction per document, so the rest goes on."""
    if not todo:
        return
    if len({p.doc.source for p in todo}) == len(todo):
        try:
            report.add(_write_batch(conn, todo, vectors, params, search, embedder, run, scope))
            return
        except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded, psycopg.errors.DeadlockDetected):
            pass
    for item in todo:
        try:
            report.add(_write_batch(conn, [item], vectors, params, search, embedder, run, scope))
        except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded) as e:  # this document only
            source = item.doc.source
            report.errors.append(
                f"{source if len(source) <= 200 else source[:200] + '…'}: not stored ({first_line(e)})"
            )


def _write_batch(
    conn,
    todo: list[Planned],
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
        store.lock_sources(conn, [p.doc.source for p in todo])
        current = store.document_hashes(conn, [p.doc.source for p in todo], scope)
        plans: list[Plan] = []
        keys: dict[tuple[int, str], str] = {}  # (plan, chunk hash) -> its duplicate key, computed once
        for p in todo:
            doc_id, current_hash = current.get(p.doc.source, (None, None))
            if current_hash == p.hash:  # another writer stored this very text meanwhile
                r.documents_unchanged += 1
                continue
            unique: dict[str, Chunk] = {}
            for c in p.chunks:
                unique.setdefault(duplicate_key(c.parent_heading, c.heading, c.text, p.doc.kind), c)
            r.duplicates_skipped += len(p.chunks) - len(unique)
            keys.update(((len(plans), c.content_hash), key) for key, c in unique.items())
            chunks = list(unique.values())
            plans.append(Plan(doc=p.doc, hash=p.hash, scrubbed_with=p.scrubbed_with, doc_id=doc_id, chunks=chunks))
        old = store.chunk_hashes_of(conn, [p.doc_id for p in plans if p.doc_id])
        r.chunks_deleted += store.delete_chunks_except(
            conn, {p.doc_id: [c.content_hash for c in p.chunks] for p in plans if p.doc_id}
        )
        new = [
            NewChunk(k=k, chunk=c)
            for k, p in enumerate(plans)
            for c in p.chunks
            if c.content_hash not in old.get(p.doc_id, {})
        ]
        missing = {c.content_hash: c for _, c in new if c.content_hash not in vectors}
        if missing:
            vectors.update(zip(missing, embedder.encode_passages([embedding_text(c) for c in missing.values()])))
        matrix = np.array([vectors[c.content_hash] for _, c in new], dtype=np.float32).reshape(
            len(new), -1 if new else 0
        )
        in_store = bulk.nearest(conn, run, matrix, [plans[n.k].doc_id for n in new], search.ef_search, scope)
        twins = {n.chunk_id for n in in_store if n and n.score >= IDENTICAL_MIN_COSINE}
        new_keys = [keys[(k, c.content_hash)] for k, c in new]
        twin_texts = store.chunk_texts(conn, sorted(twins))
        skipped, near = dedup(new, new_keys, matrix, in_store, twin_texts, [p.doc for p in plans], params)
        writes = [
            store.DocumentWrite(
                source=p.doc.source,
                path=p.doc.path,
                content_hash=p.hash,
                chunks=[c for c in p.chunks if (k, c.content_hash) not in skipped],
                near=near.get(k, {}),
                scrubbed_with=p.scrubbed_with,
                written=p.doc.written,
                scope=scope,
            )
            for k, p in enumerate(plans)
        ]
        written = store.write_documents(conn, writes, vectors)
    if run is not None:  # committed: later batches compare with these chunks
        run.add_written(written, vectors)
    r.duplicates_skipped += len(skipped)
    r.near_linked += sum(len(n) for n in near.values())
    for p, counts in zip(plans, written):
        r.chunks_inserted += counts.inserted
        r.chunks_kept += counts.kept
        r.chunks_deleted += counts.deleted
        r.documents_new += p.doc_id is None
        r.documents_updated += p.doc_id is not None
    return r
