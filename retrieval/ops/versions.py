"""Corrections as new versions (migration 019): a stored document edited by a person (the web page's edit) is
ingested again with the corrected text, so the store serves only the newer version, dated now; the text it
replaced stays in `document_versions`, dated when it was written and when it was superseded.

The document keeps the content hash of its source as last read, so ingesting the same source again (the
unchanged file, the same note posted again) leaves the correction in place; a source that changes is a newer
version and is ingested as usual."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath

import psycopg

from ..chunking import kind_for_suffix
from ..corpus.ingest import ingest_documents
from ..corpus.report import IngestReport
from ..corpus.sources import Document, text_problem
from ..embed import Embedder
from ..params import IngestParams, SearchParams

EDIT_REASON = "corrected in the web page"


class EditError(ValueError):
    """An edit that cannot be stored; the message is the one line the person sees."""


@dataclass(frozen=True)
class Version:
    text: str
    written_at: datetime
    superseded_at: datetime | None  # None: the version served now
    reason: str | None


def document_text(conn: psycopg.Connection, document_id: int) -> str:
    """A document's text as its chunks hold it (scrubbed), in order: what an edit starts from."""
    rows = conn.execute("SELECT text FROM chunks WHERE document_id = %s ORDER BY ord", (document_id,)).fetchall()
    return "\n\n".join(t for (t,) in rows)


def versions(conn: psycopg.Connection, document_id: int) -> list[Version]:
    """Every version of a document, newest first: the one served now, then those it superseded."""
    row = conn.execute("SELECT written_at FROM documents WHERE id = %s", (document_id,)).fetchone()
    if row is None:
        return []
    old = conn.execute(
        "SELECT text, written_at, superseded_at, reason FROM document_versions WHERE document_id = %s ORDER BY id DESC",
        (document_id,),
    ).fetchall()
    return [Version(document_text(conn, document_id), row[0], None, None)] + [Version(*r) for r in old]


def edit_document(
    conn: psycopg.Connection,
    document_id: int,
    scope: str,
    text: str,
    ingest: IngestParams,
    search: SearchParams,
    embedder: Embedder,
) -> IngestReport:
    """Store `text` as the newer version of document `document_id` of `scope`; the old text is kept as superseded.
    EditError (one line) for a document not in `scope`, text Postgres cannot store, a blank or unchanged text,
    or what ingest refused; nothing is changed then."""
    if why := text_problem(text):
        raise EditError(f"the correction {why}")
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise EditError("the correction is blank: to remove a memory, forget it")
    # one transaction holding the document's row: two corrections at once are two versions, one after the other
    # (the second supersedes the first), and a forget waits for the edit or makes it fail cleanly
    with conn.transaction():
        row = conn.execute(
            "SELECT source, path, content_hash, written_at FROM documents WHERE id = %s AND scope = %s FOR UPDATE",
            (document_id, scope),
        ).fetchone()
        if row is None:
            raise EditError(f"no document {document_id} in scope {scope}")
        source, path, source_hash, written_at = row
        old = document_text(conn, document_id)
        if text == old:
            raise EditError("the correction is the same text: nothing to store")
        kind = kind_for_suffix(PurePath(source).suffix) if PurePath(source).suffix else "markdown"
        # the stored hash is the source's (below): a correction back to the source's own text must still be written
        conn.execute("UPDATE documents SET content_hash = '' WHERE id = %s", (document_id,))
        # dated after the row's lock is held (not at the transaction's start): versions are dated in the order written
        (now,) = conn.execute("SELECT clock_timestamp()").fetchone()
        doc = Document(source, path, text, kind, written=now)
        report = ingest_documents(conn, [doc], ingest, search, embedder, scope)
        if report.errors:
            raise EditError(report.errors[0])
        conn.execute(
            "INSERT INTO document_versions (document_id, text, written_at, superseded_at, reason)"
            " VALUES (%s, %s, %s, %s, %s)",
            (document_id, old, written_at, now, EDIT_REASON),
        )
        conn.execute("UPDATE documents SET content_hash = %s WHERE id = %s", (source_hash, document_id))
    return report
