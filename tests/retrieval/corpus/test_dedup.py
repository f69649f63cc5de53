"""Nothing lost at ingest (issue 46): only an exact duplicate is skipped; a note that differs from a stored one by a
number, a date or a name is stored beside it, near-linked, with the date it was written. Real Postgres, real MiniLM."""

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval.corpus.dedup import duplicate_key
from retrieval.corpus.ingest import ingest_documents, ingest_paths
from retrieval.corpus.sources import Document
from retrieval.params import IngestParams, SearchParams

IP, SP = IngestParams(), SearchParams()
OLD = "Finance sync, 3 October: the Q3 revenue for the EMEA region was 4.2 million euros, up 8 %."
NEW = "Finance sync, 10 October: the Q3 revenue for the EMEA region was 4.5 million euros, up 11 %."
VARIANTS = {
    "a number": "Finance sync, 3 October: the Q3 revenue for the EMEA region was 4.7 million euros, up 8 %.",
    "a date": "Finance sync, 17 October: the Q3 revenue for the EMEA region was 4.2 million euros, up 8 %.",
    "a name": "Finance sync, 3 October: the Q3 revenue for the APAC region was 4.2 million euros, up 8 %.",
}


def rows(conn) -> int:
    return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]


def note(path: Path, text: str, day: int) -> Path:
    """A note written on `day` October 2026 (its modification time)."""
    path.write_text(text + "\n")
    t = datetime(2026, 10, day, 9, 0, tzinfo=UTC).timestamp()
    os.utime(path, (t, t))
    return path


def test_duplicate_key_folds_whitespace_and_case_of_prose_and_keeps_code_exact():
    assert duplicate_key(None, "Q3", "The  Q3\nrevenue ", "text") == duplicate_key(
        "", "q3", "the q3 revenue", "markdown"
    )
    assert duplicate_key("A", "B", "x", "text") != duplicate_key(None, "A B", "x", "text")  # the parts stay apart
    assert duplicate_key(None, None, "if x:\n    y()", "code") != duplicate_key(None, None, "if x:\ny()", "code")
    assert duplicate_key(None, None, "Foo()", "code") != duplicate_key(None, None, "foo()", "code")


def test_the_correction_is_stored_beside_the_note_it_corrects_with_both_dates(conn, embedder, tmp_path):
    ingest_paths(conn, [note(tmp_path / "sync-03.md", OLD, 3)], IP, SP, embedder)
    before = rows(conn)
    r = ingest_paths(conn, [note(tmp_path / "sync-10.md", NEW, 10)], IP, SP, embedder)
    assert (r.chunks_inserted, r.duplicates_skipped, r.near_linked, rows(conn)) == (1, 0, 1, before + 1)
    linked = conn.execute(
        """SELECT c.text, n.text, c.near_score, d.written_at, nd.written_at FROM chunks c
           JOIN documents d ON d.id = c.document_id JOIN chunks n ON n.id = c.near_chunk_id
           JOIN documents nd ON nd.id = n.document_id"""
    ).fetchone()
    assert linked[:2] == (NEW, OLD) and linked[2] >= 0.92  # the old dup_threshold would have dropped it
    assert (linked[3].day, linked[4].day) == (10, 3)


@pytest.mark.parametrize("differs_by", VARIANTS)
def test_a_note_that_differs_by_a_number_a_date_or_a_name_is_kept(conn, embedder, differs_by):
    ingest_documents(conn, [Document("webhook:old", "webhook:", OLD, "text")], IP, SP, embedder)
    before = rows(conn)
    r = ingest_documents(conn, [Document("webhook:new", "webhook:", VARIANTS[differs_by], "text")], IP, SP, embedder)
    assert (r.chunks_inserted, r.duplicates_skipped, r.near_linked) == (1, 0, 1) and rows(conn) == before + 1


def test_an_exact_duplicate_is_skipped_whitespace_and_case_aside(conn, embedder):
    ingest_documents(conn, [Document("webhook:old", "webhook:", OLD, "text")], IP, SP, embedder)
    before = rows(conn)
    again = "finance sync,  3 October:\nthe Q3 revenue for the EMEA region was 4.2 million euros,   up 8 %.  "
    r = ingest_documents(conn, [Document("webhook:again", "webhook:", again, "text")], IP, SP, embedder)
    assert (r.chunks_inserted, r.duplicates_skipped, r.near_linked, rows(conn)) == (0, 1, 0, before)


def test_within_one_document_a_near_repeat_stays_and_an_exact_one_goes(conn, embedder):
    """A document's chunks are compared by text only (they share a title, so cosine says little there)."""
    text = f"{OLD}\n\n{NEW}\n\n{OLD.upper()}\n"  # the third paragraph repeats the first, in capitals
    doc = Document("webhook:sync", "webhook:", text, "text")
    r = ingest_documents(conn, [doc], IngestParams(chunk_tokens=16), SP, embedder)
    kept = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY ord")]
    assert kept == [OLD, NEW] and (r.chunks_inserted, r.duplicates_skipped, r.near_linked) == (2, 1, 0)


def test_code_that_differs_only_in_indentation_is_kept(conn, embedder, tmp_path):
    (tmp_path / "a.py").write_text("def f(x):\n    if x:\n        return 1\n    return 2\n")
    (tmp_path / "b.py").write_text("def f(x):\n    if x:\n        return 1\n        return 2\n")
    r = ingest_paths(conn, [tmp_path], IP, SP, embedder)
    assert (r.chunks_inserted, r.duplicates_skipped) == (2, 0)
