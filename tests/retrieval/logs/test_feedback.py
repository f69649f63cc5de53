"""The feedback log on real Postgres: rows as specified, bad feedback refused with nothing written."""

import pytest

from retrieval.logs.citations import cited_ranks
from retrieval.logs.feedback import (
    FeedbackError,
    counters,
    learned_answers,
    log_query,
    record_feedback,
    record_pick,
)
from retrieval.query.search import Candidate


def cands(n=4):
    return [
        Candidate(r, 100 + r, f"/d/{r}.md", None, None, 1, 2, f"text {r}", f"h{r}", 1 - r / 10, 3)
        for r in range(1, n + 1)
    ]


def rows(conn, qid):
    return conn.execute(
        "SELECT rank, chunk_id, content_hash, pick_rank, used FROM query_candidates WHERE query_id = %s ORDER BY rank",
        (qid,),
    ).fetchall()


def test_cited_ranks_literals():
    assert cited_ranks("See [3] and [1], also [3] and [9].") == [3, 1, 9]
    assert cited_ranks("no citations") == []


def test_query_log_then_used_and_ignored(conn):
    qid = log_query(conn, "how?", cands(), "first-stage", picked=[2, 1], selection_status="ok")
    assert rows(conn, qid) == [
        (1, 101, "h1", 2, None),
        (2, 102, "h2", 1, None),
        (3, 103, "h3", None, None),
        (4, 104, "h4", None, None),
    ]
    assert record_feedback(conn, qid, used_chunk_ids=[102]).used_ranks == [2]
    assert [u for *_, u in rows(conn, qid)] == [False, True, None, None]  # 3 and 4 were never shown: no label
    r = record_feedback(conn, qid, answer="Per [4] and [1].")  # 4 was in the staging file, never in the context
    assert (r.used_ranks, r.not_shown, r.unknown, r.replaced) == ([1], [4], [], {"used_ranks": [2]})
    assert [u for *_, u in rows(conn, qid)] == [True, False, None, None]
    assert conn.execute("SELECT selector_version, answer FROM queries WHERE id = %s", (qid,)).fetchone() == (
        "first-stage",
        "Per [4] and [1].",
    )


def test_bad_feedback_writes_nothing(conn):
    qid = log_query(conn, "how?", cands(), "first-stage")
    with pytest.raises(FeedbackError, match="unknown query id 999"):
        record_feedback(conn, 999, used_chunk_ids=[101])
    with pytest.raises(FeedbackError, match=r"chunks \[555\] were not among its candidates"):
        record_feedback(conn, qid, used_chunk_ids=[101, 555], rating=1, answer="x")
    with pytest.raises(FeedbackError, match="rating must be"):
        record_feedback(conn, qid, rating=5)
    with pytest.raises(FeedbackError, match="not among its 4 candidates"):
        record_pick(conn, qid, [1, 7], "ok")
    assert [u for *_, u in rows(conn, qid)] == [None] * 4
    assert conn.execute("SELECT answer, rating FROM queries").fetchall() == [(None, None)]
    assert conn.execute("SELECT count(*) FROM learned_qa").fetchone() == (0,)


def test_late_pick_replaces_the_pending_one(conn):
    qid = log_query(conn, "how?", cands(), "first-stage")
    record_pick(conn, qid, [3, 1], "repaired")
    assert [p for _, _, _, p, _ in rows(conn, qid)] == [2, None, 1, None]
    assert conn.execute("SELECT selection_status FROM queries").fetchone() == ("repaired",)


def test_thumbs_up_learns_and_correction_replaces(conn):
    q = "how do I rotate the database password?"
    for answer in ("Use the vault CLI [1].", "Use the vault CLI [1]."):
        qid = log_query(conn, q, cands(), "first-stage")
        record_feedback(conn, qid, answer=answer, rating=1)
    assert conn.execute("SELECT answer, quality_score FROM learned_qa").fetchall() == [("Use the vault CLI [1].", 2)]
    qid = log_query(conn, q, cands(), "first-stage")
    record_feedback(conn, qid, rating=-1, correction="Run `pai rotate` instead.")
    assert conn.execute("SELECT answer, quality_score FROM learned_qa").fetchall() == [("Run `pai rotate` instead.", 2)]
    related = learned_answers(conn, "rotate database password")
    assert [a for _, a, _ in related] == ["Run `pai rotate` instead."] and related[0][2] >= 0.15
    assert learned_answers(conn, "bananas in pyjamas") == []
    assert counters(conn) == {
        "learned_qa_count": 1,
        "queries": 3,
        "use_count": 2,
        "corrections": 1,
        "fallback_rate": 0.0,
    }


def test_a_thumbs_up_on_a_long_question_is_learned_not_lost(conn):
    """/query takes 4,000 characters; a btree entry holds 2,704 bytes: keyed on the question's md5."""
    import random

    rng = random.Random(7)
    for q in ("语" * 1000, "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(4000))):
        qid = log_query(conn, q, cands(), "first-stage")
        assert record_feedback(conn, qid, answer="Per [2].", rating=1).used_ranks == [2]
        assert conn.execute("SELECT rating, answer FROM queries WHERE id = %s", (qid,)).fetchone() == (1, "Per [2].")
        assert conn.execute("SELECT quality_score FROM learned_qa WHERE question = %s", (q,)).fetchone() == (1,)
        record_feedback(conn, qid, rating=-1)  # taken back: gone, by the same key
        assert conn.execute("SELECT count(*) FROM learned_qa WHERE question = %s", (q,)).fetchone() == (0,)


def test_taking_back_a_thumbs_up_takes_back_only_what_it_gave(conn):
    q = "where are the backups?"
    a = log_query(conn, q, cands(), "first-stage")
    record_feedback(conn, a, answer="In the vault [1].", rating=1)
    b = log_query(conn, q, cands(), "first-stage")
    record_feedback(conn, b, rating=1)  # a thumbs-up with no answer adds nothing...
    assert conn.execute("SELECT answer, quality_score FROM learned_qa").fetchall() == [("In the vault [1].", 1)]
    record_feedback(conn, b, rating=-1)  # ...so taking it back must not take away a's
    assert conn.execute("SELECT answer, quality_score FROM learned_qa").fetchall() == [("In the vault [1].", 1)]
    c = log_query(conn, q, cands(), "first-stage")
    record_feedback(conn, c, answer="Ask ops [2].")
    record_feedback(conn, c, rating=1)  # the answer it gave before counts with the later thumbs-up
    assert conn.execute("SELECT answer, quality_score FROM learned_qa").fetchall() == [("In the vault [1].", 2)]
    record_feedback(conn, c, rating=1)  # the same state again changes nothing
    assert conn.execute("SELECT quality_score FROM learned_qa").fetchone() == (2,)
    record_feedback(conn, a, rating=-1)
    record_feedback(conn, c, rating=-1)
    assert conn.execute("SELECT count(*) FROM learned_qa").fetchone() == (0,)


def test_a_blank_correction_or_answer_changes_no_learned_answer(conn):
    q = "which port?"
    qid = log_query(conn, q, cands(), "first-stage")
    record_feedback(conn, qid, answer="5432 [1].", rating=1)
    for blank in ("", "   ", "\n\t"):
        record_feedback(conn, qid, correction=blank)
        record_feedback(conn, qid, answer=blank)
    assert conn.execute("SELECT answer FROM learned_qa").fetchall() == [("5432 [1].",)]
    assert conn.execute("SELECT answer, correction FROM queries").fetchone() == ("5432 [1].", None)
    assert counters(conn)["corrections"] == 0


def test_pick_and_feedback_racing_on_one_query_never_deadlock(db_url, conn):
    import threading

    from retrieval.db import connect

    qid = log_query(conn, "race", cands(), "first-stage")
    errors = []

    def hammer(fn):
        with connect(db_url) as c:
            for _ in range(40):
                try:
                    fn(c)
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

    threads = [
        threading.Thread(target=hammer, args=(lambda c: record_pick(c, qid, [2, 1], "ok"),)),
        threading.Thread(target=hammer, args=(lambda c: record_feedback(c, qid, used_chunk_ids=[101], rating=1),)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def exposure(conn, qid):
    return conn.execute(
        "SELECT rank, served_rank, shown, propensity, used FROM query_candidates WHERE query_id = %s ORDER BY rank",
        (qid,),
    ).fetchall()


def test_exposure_is_stored_per_candidate_and_an_unshown_candidate_is_never_a_negative(conn):
    """Served order [3, 1, 2], context [3, 4] (4 explored into the last slot), propensities as the policy gave."""
    p = {3: 1.0, 1: 0.9, 2: 0.05, 4: 0.05}
    qid = log_query(conn, "q?", cands(), "ranker:1", picked=[3, 1, 2], shown=[3, 4], propensity=p)
    assert exposure(conn, qid) == [
        (1, 2, False, pytest.approx(0.9), None),
        (2, 3, False, pytest.approx(0.05), None),
        (3, 1, True, 1.0, None),
        (4, None, True, pytest.approx(0.05), None),
    ]
    assert record_feedback(conn, qid, answer="It is so [4].").used_ranks == [4]  # cites the explored chunk
    assert [r[4] for r in exposure(conn, qid)] == [None, None, False, True]  # 3 shown and not cited: ignored
    record_feedback(conn, qid, used_chunk_ids=[103])
    assert [r[4] for r in exposure(conn, qid)] == [None, None, True, False]
    # a judge who saw every candidate may name negatives outside the context
    record_feedback(conn, qid, used_chunk_ids=[103], ignored_chunk_ids=[101, 102])
    assert [r[4] for r in exposure(conn, qid)] == [False, False, True, False]
    with pytest.raises(FeedbackError, match="both used and ignored"):
        record_feedback(conn, qid, used_chunk_ids=[101], ignored_chunk_ids=[101])
    with pytest.raises(FeedbackError, match="not among its candidates"):
        record_feedback(conn, qid, ignored_chunk_ids=[999])
    assert [r[4] for r in exposure(conn, qid)] == [False, False, True, False]  # refused: nothing written


def test_without_exposure_given_the_served_order_is_the_context(conn):
    qid = log_query(conn, "q?", cands(), "first-stage", picked=[1, 2])
    assert [(r[2], r[3]) for r in exposure(conn, qid)] == [(True, 1.0), (True, 1.0), (False, 0.0), (False, 0.0)]
    record_feedback(conn, qid, answer="[2]")
    assert [r[4] for r in exposure(conn, qid)] == [False, True, None, None]


def test_rows_logged_before_exposure_keep_the_old_rule(conn):
    qid = log_query(conn, "q?", cands(), "first-stage", picked=[1])
    conn.execute("UPDATE query_candidates SET shown = NULL, propensity = NULL WHERE query_id = %s", (qid,))
    record_feedback(conn, qid, used_chunk_ids=[102])
    assert [r[4] for r in exposure(conn, qid)] == [False, True, False, False]


def labels(conn, qid):
    return [u for *_, u in rows(conn, qid)]


def test_an_answer_labels_only_what_the_consumer_was_shown_and_says_what_missed(conn):
    """20 candidates, the context [1]-[5]: a citation of [12] (never shown) or [99] (no candidate) is reported, never
    a label, and never replaces the labels of the answer before it."""
    qid = log_query(conn, "q?", cands(20), "ranker:1", picked=[1, 2, 3, 4, 5])
    first = record_feedback(conn, qid, answer="Per [2].", rating=1)
    assert (first.used_ranks, first.not_shown, first.unknown, first.replaced) == ([2], [], [], {})
    assert labels(conn, qid) == [False, True, False, False, False] + [None] * 15

    for answer, not_shown, unknown in (("Per [12].", [12], []), ("Per [99].", [], [99]), ("[12] [99]", [12], [99])):
        r = record_feedback(conn, qid, answer=answer)
        assert (r.used_ranks, r.not_shown, r.unknown, r.answer_recorded) == ([], not_shown, unknown, False)
        assert r.replaced == {}
        assert labels(conn, qid) == [False, True, False, False, False] + [None] * 15  # the earlier labels stand
        assert conn.execute("SELECT answer FROM queries WHERE id = %s", (qid,)).fetchone() == ("Per [2].",)

    r = record_feedback(conn, qid, answer="Per [3], not [99] or [12].", rating=-1)
    assert (r.used_ranks, r.not_shown, r.unknown, r.answer_recorded) == ([3], [12], [99], True)
    assert r.replaced == {"used_ranks": [2], "rating": 1, "answer": "Per [2]."}
    assert labels(conn, qid) == [False, False, True, False, False] + [None] * 15
    assert record_feedback(conn, qid, answer="Per [3], not [99] or [12].", rating=-1).replaced == {}  # the same: none

    # a judge's explicit labels are taken as given, shown or not
    r = record_feedback(conn, qid, used_chunk_ids=[112])
    assert (r.used_ranks, r.not_shown, r.unknown, r.replaced) == ([12], [], [], {"used_ranks": [3]})
    assert labels(conn, qid)[:12] == [False] * 5 + [None] * 6 + [True]


def test_citations_on_rows_logged_before_exposure_label_as_before(conn):
    qid = log_query(conn, "q?", cands(4), "first-stage")  # no served order, no context: shown NULL
    r = record_feedback(conn, qid, answer="Per [4] and [9].")
    assert (r.used_ranks, r.not_shown, r.unknown) == ([4], [], [9])
    assert labels(conn, qid) == [False, False, False, True]
