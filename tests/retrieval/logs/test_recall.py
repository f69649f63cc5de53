"""What past questions like a new one cited (`recalled`): the definition (`retrieval.contracts.recalled`) and the
service's read of the log's tables (`retrieval.logs.recall`) on real Postgres and the real embedder, which must give
the pulled log's `Bank` the same evidence; the query's own text, another scope, a voided query, a scrubbed text and
a forgotten one give none."""

import numpy as np
import pytest

from retrieval.contracts.recalled import RECALL_FLOOR, Bank, recalled_feature
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.logs.recall import evidence
from retrieval.ops.forget_log import rewrite_queries
from retrieval.query.search import Candidate

ASKED = "Does vitamin D supplementation reduce fracture risk in older adults?"
LIKE = "Vitamin D supplements lower the risk of fractures in elderly people."
OTHER = "How do I rotate the service's write token?"


def cands(ids):
    return [Candidate(r, c, f"/d/{c}.md", None, None, 1, 2, f"text {c}", f"h{c}", 0.5, 3) for r, c in enumerate(ids, 1)]


def ask(conn, embedder, text, ids, cited, *, scope="default", rating=None):
    """One logged query of `text` showing `ids`, its answer citing `cited` (chunk ids)."""
    qid = log_query(
        conn,
        text,
        cands(ids),
        "first-stage",
        picked=list(range(1, len(ids) + 1)),
        scope=scope,
        embedding=embedder.encode([text])[0],
    )
    record_feedback(conn, qid, used_chunk_ids=list(cited), rating=rating)
    return qid


def test_the_feature_is_the_strongest_evidence_above_the_threshold():
    f = recalled_feature([(), ((0.8, 1.0),), ((0.7, 1.0), (0.9, 0.5)), ((0.55, 1.0),), ((1.0, 0.25),)], 0.6)
    assert f == pytest.approx([0.0, 0.5, 0.375, 0.0, 0.25])
    assert not recalled_feature([((1.0000001, 1.0),), ((0.9, 1.0),)], 1.0).any()  # a threshold of 1: off


def test_the_service_reads_what_a_similar_question_cited(conn, embedder):
    ask(conn, embedder, LIKE, [1, 2, 3], [2])
    ask(conn, embedder, LIKE, [1, 2, 3], [2, 3])  # asked twice: 2 cited both times, 3 once
    ask(conn, embedder, OTHER, [1, 2, 3], [1])  # not alike: never read
    q = embedder.encode([ASKED])[0]
    got = evidence(conn, ASKED, q, [1, 2, 3, 4], ["default"])
    sim = float(embedder.encode([LIKE])[0] @ q)
    assert sim >= RECALL_FLOOR and set(got) == {2, 3}
    assert got[2] == (pytest.approx((sim, 1.0), abs=2e-3),) and got[3] == (pytest.approx((sim, 0.5), abs=2e-3),)
    # the pulled log's bank gives the same evidence
    records = [
        {"query": t, "scope": "default", "rating": None, "candidates": [{"chunk_id": c, "used": c in u} for c in ids]}
        for t, ids, u in ((LIKE, [1, 2, 3], {2}), (LIKE, [1, 2, 3], {2, 3}), (OTHER, [1, 2, 3], {1}))
    ]
    bank = Bank.from_records(records, embedder.encode)
    ev = bank.evidence(ASKED, q, ["1", "2", "3", "4"], "default")
    assert [len(e) for e in ev] == [0, 1, 1, 0]
    assert ev[1][0] == pytest.approx(got[2][0], abs=2e-3) and ev[2][0] == pytest.approx(got[3][0], abs=2e-3)


def test_no_evidence_from_its_own_text_another_scope_or_a_voided_query(conn, embedder):
    ask(conn, embedder, ASKED, [1, 2], [1])  # the same text: never its own evidence
    ask(conn, embedder, LIKE, [1, 2], [2], scope="team-b")  # another scope
    ask(conn, embedder, LIKE, [1, 2, 5], [5], rating=-1)  # rated -1: its citations are void
    q = embedder.encode([ASKED])[0]
    assert evidence(conn, ASKED, q, [1, 2, 5], ["default"]) == {}
    assert set(evidence(conn, ASKED, q, [1, 2, 5], ["default", "team-b"])) == {2}
    assert evidence(conn, ASKED, q, [], ["default"]) == {} and evidence(conn, ASKED, q, [1], []) == {}


def test_a_scrubbed_text_keeps_no_vector_and_a_forgotten_text_loses_it(conn, embedder):
    secret = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
    qid = ask(conn, embedder, f"{LIKE} key {secret}", [1, 2], [2])
    assert conn.execute("SELECT embedding IS NULL FROM queries WHERE id = %s", (qid,)).fetchone() == (True,)
    kept = ask(conn, embedder, LIKE, [1, 2], [2])
    q = embedder.encode([ASKED])[0]
    assert set(evidence(conn, ASKED, q, [1, 2], ["default"])) == {2}
    rewrite_queries(conn, [], "fractures", [kept])  # a forget of a text the query held
    assert conn.execute("SELECT embedding IS NULL FROM queries WHERE id = %s", (kept,)).fetchone() == (True,)
    assert evidence(conn, ASKED, q, [1, 2], ["default"]) == {}


def test_hostile_texts_are_read_as_data(conn, embedder):
    for text in ("x' OR 1=1 --", "%", "\\", "é" * 5000):
        ask(conn, embedder, text, [1], [1])
        got = evidence(conn, text, np.asarray(embedder.encode([text])[0]), [1], ["default"])
        assert all(0 <= s <= 1.0001 and 0 < share <= 1 for ev in got.values() for s, share in ev)
