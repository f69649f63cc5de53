"""One query through the service (serving/service.py `run_query`): retrieve -> pick -> log -> the response body,
on a real Postgres with the real MiniLM, called directly (no HTTP)."""

import os
from datetime import UTC, datetime
from pathlib import Path

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from serving.service import in_process, run_query

NOTES = {
    "bees.md": "# Bees\n\nHoney bees collect nectar from flowers and store it as honey in wax combs.",
    "rivers.md": "# Rivers\n\nRivers carry fresh water from mountains down to the sea, shaping valleys.",
    "compilers.md": "# Compilers\n\nA compiler parses source code into a syntax tree and emits machine code.",
}


def test_a_query_is_retrieved_picked_logged_and_answered(db_url, embedder, tmp_path, first_stage_service):
    for name, text in NOTES.items():
        (tmp_path / name).write_text(text)
    with connect(db_url) as conn:
        ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)
    service = first_stage_service()
    assert service.ready()  # a pinned selector serves at once
    # the pool the app's lifespan opens (tests/serving/test_app.py runs the same over HTTP)
    with in_process(service):
        body = run_query(service, "how do bees make honey?", inline=True)
        cut = run_query(service, "how do bees make honey?", inline=True, k=1)
    assert (body["query_id"], body["selector_version"], body["selection_status"]) == (1, "first-stage", "ok")
    assert body["context"][0]["source"].endswith("bees.md") and body["context"][0]["text"].startswith("# Bees")
    assert [c["rank"] for c in body["candidates"]] == [1, 2, 3] and body["exploration"] is None
    assert (tmp_path / "staging").exists() and body["staging_file"].endswith(".md")
    with connect(db_url) as conn:
        logged = conn.execute(
            "SELECT text, selector_version FROM queries WHERE id = %s", (body["query_id"],)
        ).fetchone()
        (n_candidates,) = conn.execute(
            "SELECT count(*) FROM query_candidates WHERE query_id = %s", (body["query_id"],)
        ).fetchone()
    assert logged == ("how do bees make honey?", "first-stage") and n_candidates == 3
    # k=1: the consumer is given one chunk, and only that one is logged as shown (the others are never negatives)
    assert [c["rank"] for c in cut["context"]] == [body["context"][0]["rank"]]
    with connect(db_url) as conn:
        shown = conn.execute(
            "SELECT rank, shown, propensity FROM query_candidates WHERE query_id = %s ORDER BY rank", (cut["query_id"],)
        ).fetchall()
    assert [(r, s) for r, s, _ in shown] == [(1, True), (2, False), (3, False)] and shown[1][2] == 0.0


def test_both_finance_notes_reach_the_context_dated_and_the_newer_marked(
    db_url, embedder, tmp_path, first_stage_service
):
    """Issue 46: the correction is not dropped as a duplicate of the note it corrects; the context holds both, each
    with the date its file was written, the newer one marked newer than the older (and the staging file says so)."""
    notes = {
        "sync-03.md": ("Finance sync, 3 October: the Q3 revenue for the EMEA region was 4.2 million euros, up 8 %.", 3),
        "sync-10.md": (
            "Finance sync, 10 October: the Q3 revenue for the EMEA region was 4.5 million euros, up 11 %.",
            10,
        ),
        **{name: (text, 1) for name, text in NOTES.items()},
    }
    for name, (text, day) in notes.items():
        (tmp_path / name).write_text(text)
        t = datetime(2026, 10, day, 9, 0, tzinfo=UTC).timestamp()
        os.utime(tmp_path / name, (t, t))
    with connect(db_url) as conn:
        ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)
    service = first_stage_service()
    with in_process(service):
        body = run_query(service, "what was Q3 EMEA revenue?", inline=True)
    finance = {c["source"].rsplit("/", 1)[1]: c for c in body["context"] if "Finance sync" in c["text"]}
    old, new = finance["sync-03.md"], finance["sync-10.md"]
    assert (old["date"], new["date"]) == ("2026-10-03T09:00:00+00:00", "2026-10-10T09:00:00+00:00")
    assert (old["newer_than"], new["newer_than"]) == ([], [old["rank"]])
    md = Path(body["staging_file"]).read_text()
    assert f"written 2026-10-10 · newer than #{old['rank']}\n" in md and "written 2026-10-03\n" in md


def test_a_chunk_a_similar_question_cited_is_served_first(db_url, embedder, tmp_path, first_stage_service, make_ranker):
    """The ranker's `recalled`: a note the answer to a similar past question cited is put first for a new question
    that its own words rank it low for; a ranker with no weight on it moves nothing (another scope's citations:
    tests/retrieval/logs/test_recall.py)."""
    from retrieval.logs.feedback import record_feedback
    from serving.picker import Picker
    from serving.ranker import RankerSelector

    notes = dict(NOTES) | {"apiaries.md": "# Apiaries\n\nHives in the orchard, inspected every spring by the keeper."}
    for name, text in notes.items():
        (tmp_path / "notes").mkdir(exist_ok=True)
        (tmp_path / "notes" / name).write_text(text)
    with connect(db_url) as conn:
        ingest_paths(conn, [tmp_path / "notes"], IngestParams(), SearchParams(), embedder)

    def service(weights, **kw):
        folder = make_ranker(
            tmp_path / f"ranker-{len(weights)}-{weights.get('recalled')}", weights, recall_threshold=0.6
        )
        picker = Picker(RankerSelector(folder, "pai-selector:1"), timeout_s=5)
        return first_stage_service(picker=picker, search=SearchParams(threshold=0.0), **kw)

    asked, again = "how do bees make honey?", "how is honey made by bees?"
    plain = service({"similarity": 1.0})
    with in_process(plain):
        before = run_query(plain, again, inline=True)
        first = run_query(plain, asked, inline=True)
    apiaries = next(c for c in first["candidates"] if c["source"].endswith("apiaries.md"))
    assert not before["context"][0]["source"].endswith("apiaries.md")
    with connect(db_url) as conn:  # the answer to the first question cited the apiaries note
        record_feedback(conn, first["query_id"], used_chunk_ids=[apiaries["chunk_id"]])
    remembering, plain = service({"similarity": 1.0, "recalled": 6.0}), service({"similarity": 1.0})
    with in_process(remembering), in_process(plain):
        after = run_query(remembering, again, inline=True)
        unweighed = run_query(plain, again, inline=True)
    assert after["context"][0]["source"].endswith("apiaries.md")
    assert [c["source"] for c in unweighed["context"]] == [c["source"] for c in before["context"]]
