"""A first load into an empty store builds the HNSW index once, after the vectors are in, as pgvector advises
("create the index after loading initial data"): inserting each vector into the graph costs ~1 ms on 2 cores,
building the graph over 9,300 SciFact chunks at the end ~1.4 s in all (`pai lab bench ingest`).

While the index is away, dedup compares each new chunk with the chunks this run has committed, exactly, in
memory (`RunIndex`): in a store that was empty there is nothing else to compare with. Another writer's
chunks committed meanwhile are not compared with (at worst a near-duplicate is stored twice, nothing is lost),
and a chunk the index found that is gone by the time the batch writes (a document this run replaced) is not
used. The index comes back when the run ends, fails, or holds `ingest.bulk_max_chunks` (the exact comparison
grows with the square of the chunks); a process killed in between leaves the store without it, searched
exactly (correct, slower) until the next `pai ingest` or `pai migrate` builds it (`vector_index.ensure_hnsw`). The lexical
(GIN) indexes are deferred with it (`LEXICAL_INDEXES`) and come back with it (`ensure_lexical`).
"""

from __future__ import annotations

import numpy as np
import psycopg

from ..params import IngestParams, SearchParams
from . import store, vector_index

# the full-text and trigram (GIN) indexes, as the migrations define them: a first load builds them after its rows are
# in too, which costs less than keeping them up row by row (SciFact, vectors cached: 6.3-6.9 s vs 8.3-9.1 s in all)
LEXICAL_INDEXES = {
    "chunks_trgm": "CREATE INDEX IF NOT EXISTS chunks_trgm ON chunks USING gin (text gin_trgm_ops)",
    "chunk_terms_tsv": "CREATE INDEX IF NOT EXISTS chunk_terms_tsv ON chunk_terms USING gin (tsv)",
}


class RunIndex:
    """The chunks a run committed: id, document id and vector (halfvec-rounded, as the store keeps them)."""

    def __init__(self):
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._docs = np.zeros(0, dtype=np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, chunk_ids: list[int], document_ids: list[int], vectors: np.ndarray) -> None:
        if not chunk_ids:
            return
        v = np.asarray(vectors, dtype=np.float16).astype(np.float32)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        need = self._n + len(v)
        if need > len(self._vectors):  # grow by doubling
            size = max(need, 2 * len(self._vectors), 1024)
            grown = np.zeros((size, v.shape[1]), dtype=np.float32)
            ids, docs = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
            if self._n:
                grown[: self._n] = self._vectors[: self._n]
                ids[: self._n], docs[: self._n] = self._ids[: self._n], self._docs[: self._n]
            self._vectors, self._ids, self._docs = grown, ids, docs
        self._vectors[self._n : need] = v
        self._ids[self._n : need] = chunk_ids
        self._docs[self._n : need] = document_ids
        self._n = need

    def add_written(self, written: list[store.WriteCounts], vectors: dict[str, np.ndarray]) -> None:
        """The chunks a committed batch inserted (`store.write_documents`' counts), with their vectors."""
        new = [(cid, w.document_id, vectors[h]) for w in written for h, cid in w.inserted_ids.items()]
        if new:
            ids, docs, vecs = zip(*new)
            self.add(list(ids), list(docs), np.array(vecs))

    def forget(self, chunk_ids: set[int]) -> None:
        keep = ~np.isin(self._ids[: self._n], list(chunk_ids))
        n = int(keep.sum())
        self._vectors[:n], self._ids[:n], self._docs[:n] = (
            a[: self._n][keep] for a in (self._vectors, self._ids, self._docs)
        )
        self._n = n

    def nearest(self, vectors: np.ndarray, other_than: list[int | None]) -> list[vector_index.Near | None]:
        """Each vector's nearest committed chunk of another document (cosine, exact): `vector_index.nearest`'s answer."""
        if len(vectors) == 0 or self._n == 0:
            return [None] * len(vectors)
        q = np.asarray(vectors, dtype=np.float16).astype(np.float32)
        q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        sims = q @ self._vectors[: self._n].T
        docs = self._docs[: self._n]
        for i, other in enumerate(other_than):
            if other is not None:
                sims[i, docs == other] = -np.inf
        best = sims.argmax(axis=1)
        return [
            vector_index.Near(int(self._ids[j]), int(docs[j]), float(sims[i, j])) if np.isfinite(sims[i, j]) else None
            for i, j in enumerate(best)
        ]


def begin(conn: psycopg.Connection, n_docs: int, params: IngestParams) -> RunIndex | None:
    """A `RunIndex` when this is a first load worth deferring the index for (an empty store, more than one
    batch of documents, `ingest.bulk_max_chunks` > 0, a role that may drop the index); else None."""
    if params.bulk_max_chunks <= 0 or n_docs <= params.batch_docs:
        return None
    try:
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '5s'")
            (empty,) = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks)").fetchone()
            if not empty:
                return None
            for name in ("chunks_embedding_hnsw", *LEXICAL_INDEXES):
                conn.execute(f"DROP INDEX IF EXISTS {name}")
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.LockNotAvailable):
        return None  # not the owner, or a reader holds the table: the usual way, index kept
    return RunIndex()


class FirstLoad:
    """`with FirstLoad(...) as load:` `load.run` is the `RunIndex` while the index is deferred (else None);
    `load.written()` after each batch; the index is built when the run holds `bulk_max_chunks`, and on exit."""

    def __init__(self, conn: psycopg.Connection, n_docs: int, params: IngestParams, search: SearchParams):
        self.conn, self.params, self.search = conn, params, search
        self.run = begin(conn, n_docs, params)

    def written(self) -> None:
        if self.run is not None and len(self.run) >= self.params.bulk_max_chunks:
            ensure_indexes(self.conn, self.search)  # the exact comparison grows with the square of the run
            self.run = None

    def __enter__(self) -> FirstLoad:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if self.run is None:
            return
        self.run = None
        try:
            ensure_indexes(self.conn, self.search)
        except psycopg.Error:
            if exc_type is None:
                raise  # else the run's own error is the one to see; the next ingest or maintain builds it


def ensure_indexes(conn: psycopg.Connection, search: SearchParams) -> None:
    """Build the indexes a first load deferred, or one killed before its end left away, and the HNSW one to params
    (another writer may have built one meanwhile: then it is kept)."""
    ensure_lexical(conn)
    try:
        vector_index.ensure_hnsw(conn, search.hnsw_m, search.hnsw_ef_construction)
    except (psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation):
        pass  # a concurrent run built it first


def ensure_lexical(conn: psycopg.Connection) -> list[str]:
    """Build the lexical indexes that are missing (a first load killed before its end left them away); their names.
    A role that may not create them leaves them to `pai migrate`: search is still right without them, only slower."""
    built = []
    for name, ddl in LEXICAL_INDEXES.items():
        if conn.execute("SELECT to_regclass(%s) IS NULL", (name,)).fetchone()[0]:
            try:
                with conn.transaction():
                    conn.execute(ddl)
                built.append(name)
            except (psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation):
                pass  # a concurrent run built it first
            except psycopg.errors.InsufficientPrivilege:
                break
    return built


def nearest(
    conn: psycopg.Connection,
    run: RunIndex | None,
    vectors: np.ndarray,
    other_than: list[int | None],
    ef_search: int,
    scope: str,
) -> list:
    """`vector_index.nearest`'s answer: from HNSW, or, while a first load defers the index (`run`), from the run's chunks,
    exactly, each one found locked until the batch commits (KEY SHARE: it cannot be deleted under a link to it);
    one that is gone (a document this run replaced) is forgotten and the next nearest taken."""
    if run is None:
        return vector_index.nearest(conn, vectors, other_than, ef_search, scope)
    while True:
        near = run.nearest(vectors, other_than)
        ids = sorted({n.chunk_id for n in near if n})
        if not ids:
            return near
        rows = conn.execute("SELECT id FROM chunks WHERE id = ANY(%s) FOR KEY SHARE", (ids,)).fetchall()
        gone = set(ids) - {i for (i,) in rows}
        if not gone:
            return near
        run.forget(gone)
