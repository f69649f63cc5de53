"""Corrections as new versions (`retrieval.ops.versions`) on a real Postgres and the real embedder: the search
serves only the newer version, dated now; the old text stays, superseded, both dated; ingesting the unchanged
source again keeps the correction, a changed source is a newer version; bad edits change nothing; a person's
label on one candidate (`retrieval.logs.ratings`) is held to its query's scope."""

import time

import pytest

from retrieval.corpus.ingest import ingest_documents, ingest_paths
from retrieval.corpus.sources import Document
from retrieval.logs.feedback import FeedbackError, log_query
from retrieval.logs.ratings import rate
from retrieval.ops import browse
from retrieval.ops.versions import EditError, document_text, edit_document, versions
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import search

SP = SearchParams(threshold=0.0)
OLD = "# Dentist\n\nThe dentist appointment is on Tuesday at nine."
NEW = "# Dentist\n\nThe dentist appointment moved to Thursday at eleven."


def doc_id(conn, source: str) -> int:
    return conn.execute("SELECT id FROM documents WHERE source = %s", (source,)).fetchone()[0]


def texts(conn, embedder, query: str) -> list[str]:
    return [c.text for c in search(conn, embedder, query, SP).candidates]


def test_an_edit_is_a_newer_version_and_the_old_stays(conn, embedder, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "dentist.md").write_text(OLD)
    ingest_paths(conn, [notes], IngestParams(), SP, embedder)
    did = doc_id(conn, str((notes / "dentist.md").resolve()))
    (written_before,) = conn.execute("SELECT written_at FROM documents WHERE id = %s", (did,)).fetchone()
    time.sleep(0.01)
    edit_document(conn, did, "default", NEW, IngestParams(), SP, embedder)
    served = texts(conn, embedder, "when is the dentist")
    assert any("Thursday" in t for t in served) and not any("Tuesday" in t for t in served)
    now, old = versions(conn, did)
    assert "Thursday" in now.text and now.superseded_at is None and now.written_at > written_before
    assert "Tuesday" in old.text and old.written_at == written_before and old.superseded_at >= now.written_at
    # the unchanged file ingested again: the correction stays
    ingest_paths(conn, [notes], IngestParams(), SP, embedder)
    assert any("Thursday" in t for t in texts(conn, embedder, "when is the dentist"))
    # the file changed: a newer version, ingested as usual
    (notes / "dentist.md").write_text("# Dentist\n\nThe dentist appointment is cancelled.")
    ingest_paths(conn, [notes], IngestParams(), SP, embedder)
    served = texts(conn, embedder, "when is the dentist")
    assert any("cancelled" in t for t in served) and not any("Thursday" in t for t in served)
    assert browse.document(conn, did, ["default"]).versions == 1
    assert browse.document(conn, did, ["other"]) is None


@pytest.mark.parametrize(
    ("text", "scope", "why"),
    [
        ("a\x00b", "default", "NUL"),
        ("  \n ", "default", "blank"),
        (OLD.split("\n\n")[1], "default", "same text"),
        ("x", "someone/else", "no document"),
        ("\ud800", "default", "Unicode"),
    ],
)
def test_a_bad_edit_changes_nothing(conn, embedder, text, scope, why):
    ingest_documents(conn, [Document("webhook:dentist", "webhook:", OLD, "markdown")], IngestParams(), SP, embedder)
    did = doc_id(conn, "webhook:dentist")
    if why == "same text":
        text = document_text(conn, did)
    with pytest.raises(EditError, match=why):
        edit_document(conn, did, scope, text, IngestParams(), SP, embedder)
    assert len(versions(conn, did)) == 1 and "Tuesday" in versions(conn, did)[0].text


def test_a_rating_labels_one_candidate_of_its_scope(conn, embedder):
    ingest_documents(conn, [Document("webhook:dentist", "webhook:", OLD, "markdown")], IngestParams(), SP, embedder)
    cands = search(conn, embedder, "dentist", SP).candidates
    qid = log_query(conn, "dentist", cands, "first-stage", [1], shown=[1], scope="alice")
    chunk = cands[0].chunk_id
    with pytest.raises(FeedbackError, match="unknown query id"):
        rate(conn, qid, chunk, True, ["bob"])
    with pytest.raises(FeedbackError, match="not among its candidates"):
        rate(conn, qid, chunk + 1000, True, ["alice"])
    assert rate(conn, qid, chunk, False, ["alice"]) == 1
    used, rated = conn.execute(
        "SELECT used, rated_at FROM query_candidates WHERE query_id = %s AND chunk_id = %s", (qid, chunk)
    ).fetchone()
    assert used is False and rated is not None
    assert browse.history(conn, chunk, ["alice"])[0].rated_at == rated
    assert browse.history(conn, chunk, ["bob"]) == []


def test_two_corrections_at_once_are_two_versions(db_url, embedder):
    """Two edits racing on one document: one waits for the other, each superseded text is kept once, and a
    correction back to the source's own text is written too."""
    import threading

    from retrieval.db import connect

    with connect(db_url) as conn:
        ingest_documents(conn, [Document("webhook:dentist", "webhook:", OLD, "markdown")], IngestParams(), SP, embedder)
        did = doc_id(conn, "webhook:dentist")
    texts_in = [NEW, "# Dentist\n\nThe dentist appointment is on Friday at noon."]
    errors = []

    def edit(text):
        try:
            with connect(db_url) as c:
                edit_document(c, did, "default", text, IngestParams(), SP, embedder)
        except Exception as e:  # noqa: BLE001 - the test reports any
            errors.append(e)

    threads = [threading.Thread(target=edit, args=(t,)) for t in texts_in]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    with connect(db_url) as conn:
        vs = versions(conn, did)
        assert len(vs) == 3 and "Tuesday" in vs[2].text
        assert vs[0].text == document_text(conn, did) and vs[1].superseded_at == vs[0].written_at > vs[1].written_at
        assert sorted(("Thursday" in v.text, "Friday" in v.text) for v in vs[:2]) == [(False, True), (True, False)]
        edit_document(conn, did, "default", OLD, IngestParams(), SP, embedder)  # back to the source's own text
        assert "Tuesday" in document_text(conn, did) and len(versions(conn, did)) == 4
        assert any("Tuesday" in t for t in texts(conn, embedder, "when is the dentist"))


def test_a_query_logged_under_the_first_stage_orders_old_name_reads_as_first_stage(conn, embedder):
    """The chunk's history names the version that served each query as named now (`similarity` before issue 59)."""
    ingest_documents(conn, [Document("webhook:dentist", "webhook:", OLD, "markdown")], IngestParams(), SP, embedder)
    cands = search(conn, embedder, "dentist", SP).candidates
    log_query(conn, "dentist", cands, "similarity", [1], shown=[1], scope="alice")  # as an older pai logged it
    assert [e.selector_version for e in browse.history(conn, cands[0].chunk_id, ["alice"])] == ["first-stage"]
