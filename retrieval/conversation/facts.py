"""Captured facts as documents: each fact stored through ingest (scrub, dedup, near links) as a document of
kind 'fact' tied to its exchange, a duplicate answered with the chunk it duplicates, and an older captured fact
that a new one restates marked superseded."""

from __future__ import annotations

import numpy as np

from ..corpus import vector_index
from ..corpus.ingest import ingest_documents
from ..corpus.sources import Document
from ..embed import Embedder
from ..params import IngestParams, SearchParams
from ..scopes import DEFAULT
from ..scrub import scrub

FACT_PATH = "capture:"  # documents.path of every fact (no file: never walked, never deleted as "gone")


def supersede(conn, fact_ids: list[int], threshold: float) -> int:
    """Older captured facts that a newly stored fact restates (its near link, cosine >= threshold, to a fact
    of another exchange) are marked superseded by the new fact's document; `pai maintain` collects them.
    Below the threshold a near fact is related, not replaced, and stays. Returns how many were marked."""
    if not fact_ids:
        return 0
    return conn.execute(
        """UPDATE documents old SET superseded_by = new.document_id
           FROM chunks new JOIN chunks near ON near.id = new.near_chunk_id
           JOIN documents newdoc ON newdoc.id = new.document_id
           WHERE new.id = ANY(%s) AND old.id = near.document_id AND old.kind = 'fact'
             AND old.capture_id IS DISTINCT FROM newdoc.capture_id AND old.superseded_by IS NULL
             AND 1 - (new.embedding <=> near.embedding) >= %s""",
        (fact_ids, threshold),
    ).rowcount


def store_facts(
    conn,
    capture_id: int,
    facts: list[str],
    ingest: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    scope: str = DEFAULT,
) -> tuple[list[int], list[int], int]:
    """Each fact a document of its own in `scope`, through ingest (scrub, exact duplicates skipped, near ones
    linked); duplicates leave no document, only the id of the chunk they duplicate."""
    docs = [Document(f"capture:{capture_id}#{i}", FACT_PATH, f, "text") for i, f in enumerate(facts, start=1)]
    report = ingest_documents(conn, docs, ingest, search, embedder, scope)
    if report.errors:
        raise RuntimeError(report.errors[0])
    sources = [d.source for d in docs]
    conn.execute(
        "UPDATE documents SET kind = 'fact', capture_id = %s WHERE scope = %s AND source = ANY(%s)",
        (capture_id, scope, sources),
    )
    rows = conn.execute(
        """SELECT d.id, d.source, c.id, c.near_chunk_id FROM documents d LEFT JOIN chunks c ON c.document_id = d.id
           WHERE d.scope = %s AND d.source = ANY(%s) ORDER BY d.id, c.ord""",
        (scope, sources),
    ).fetchall()
    fact_ids = [c for _, _, c, _ in rows if c is not None]
    linked = sum(1 for _, _, c, near in rows if c is not None and near is not None)
    empty = {doc_id: source for doc_id, source, c, _ in rows if c is None}
    duplicate_of = []
    if empty:  # which stored chunk each duplicate was skipped for (ingest decided; this only looks it up)
        text = {d.source: d.text for d in docs}
        vectors = embedder.encode_passages([scrub(text[s]).text for s in empty.values()])  # cached by ingest
        duplicate_of = [
            n.chunk_id for n in vector_index.nearest(conn, np.array(vectors), None, search.ef_search, scope) if n
        ]
        conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (list(empty),))
    return fact_ids, duplicate_of, linked
