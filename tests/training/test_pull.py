"""Stage pull against a real Postgres: incremental, idempotent, kill-safe, schema-checked."""

import json
from collections import Counter
from datetime import UTC, datetime

from retrieval.logs.feedback import log_query, record_feedback
from retrieval.query.search import Candidate
from training.pull import PullParams, check_record, pull, to_record


def cands(n=3):
    return [
        Candidate(r, 100 + r, f"/d/{r}.md", "H", None, 1, 2, f"text {r}", f"h{r}", 1 - r / 10, 3)
        for r in range(1, n + 1)
    ]


def read(out):
    return [json.loads(line) for line in open(out / "feedback.jsonl")]


def test_to_record_scrubs_and_check_record_literals():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    row = (
        1,
        "my password=hunter22 fails",
        now,
        now,
        "first-stage",
        "pai-selector:3",
        "p/1",
        "ok",
        0.2,
        1,
        None,
        None,
        [
            {
                "rank": 1,
                "chunk_id": 5,
                "content_hash": "h",
                "score": 0.5,
                "source": "s",
                "heading": None,
                "text": "token: ghp_" + "a" * 36,
                "pick_rank": 1,
                "used": True,
            }
        ],
    )
    red = Counter()
    rec = to_record(row, red)
    assert rec["query"] == "my password=[REDACTED:PASSWORD] fails"
    assert (rec["selector_version"], rec["picked_by"]) == ("first-stage", "pai-selector:3")
    assert rec["candidates"][0]["text"] == "token: [REDACTED:GITHUB_TOKEN]"
    assert red == {"PASSWORD": 1, "GITHUB_TOKEN": 1}
    assert check_record(rec) is None
    assert check_record({**rec, "query": " "}) == "empty query"
    assert check_record({**rec, "candidates": []}) == "no candidates"
    assert check_record({**rec, "candidates": [{**rec["candidates"][0], "rank": 2}]}) == "candidate ranks are not 1..N"


def test_pull_is_incremental_and_idempotent(conn, db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    p = PullParams(out=str(tmp_path / "fb"), batch=2, lag_seconds=0)
    q1 = log_query(conn, "first", cands(), "first-stage", threshold=0.2)
    q2 = log_query(conn, "second", cands(), "first-stage", threshold=0.2)
    q3 = log_query(conn, "third", cands(), "first-stage", threshold=0.2)
    m = pull(p)
    assert (m["queries"], m["pulled_now"], m["unlabelled"]) == (3, 3, 9)
    assert [r["query_id"] for r in read(tmp_path / "fb")] == [q1, q2, q3]
    assert pull(p)["pulled_now"] == 0  # nothing new: nothing pulled, same file
    record_feedback(conn, q2, used_chunk_ids=[102], rating=1)
    m = pull(p)
    assert (m["queries"], m["pulled_now"], m["used"], m["ignored"], m["thumbs_up"]) == (3, 1, 1, 2, 1)
    rec = {r["query_id"]: r for r in read(tmp_path / "fb")}[q2]
    assert [c["used"] for c in rec["candidates"]] == [False, True, False] and rec["threshold"] == 0.2
    # killed after writing the data but before the watermark: the re-pull merges, nothing doubles
    (tmp_path / "fb" / "watermark.json").unlink()
    m = pull(p)
    assert (m["queries"], m["pulled_now"]) == (3, 3)
    assert len(read(tmp_path / "fb")) == 3


def test_another_stores_export_is_never_merged(conn, db_url, monkeypatch, tmp_path):
    """Issue 57: query ids start at 1 in every database, so a folder holding another store's export (the demo's, then
    the user's; two homes from one checkout) would be merged by id: the new rows overwriting the old, the rest of
    the old staying. The watermark names the store; a pull from another one starts over."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    p = PullParams(out=str(tmp_path / "fb"), lag_seconds=0)
    for text in ("first", "second", "third"):
        log_query(conn, text, cands(), "first-stage")
    first = pull(p)
    assert first["queries"] == 3 and first["store"]
    # another store: its own identity, its query ids from 1 again
    conn.execute("UPDATE store_identity SET id = gen_random_uuid()")
    conn.execute("TRUNCATE queries RESTART IDENTITY CASCADE")
    log_query(conn, "the other store's only query", cands(), "first-stage")
    m = pull(p)
    assert m["queries"] == 1 and m["store"] != first["store"]
    assert [r["query"] for r in read(tmp_path / "fb")] == ["the other store's only query"]
    # an export from before stores were named (no store in its watermark) is not trusted either
    w = json.loads((tmp_path / "fb" / "watermark.json").read_text())
    (tmp_path / "fb" / "watermark.json").write_text(json.dumps({k: v for k, v in w.items() if k != "store"}))
    assert pull(p)["pulled_now"] == 1


def test_lag_holds_back_fresh_rows(conn, db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    log_query(conn, "fresh", cands(), "first-stage")
    assert pull(PullParams(out=str(tmp_path / "fb"), lag_seconds=3600))["queries"] == 0


def test_changed_chunk_text_is_exported_as_missing(conn, db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    log_query(conn, "q", cands(), "first-stage")  # chunk ids 101.. do not exist in chunks
    m = pull(PullParams(out=str(tmp_path / "fb"), lag_seconds=0))
    assert m["text_missing"] == 3


def test_a_scoped_pull_never_takes_another_scopes_feedback(conn, db_url, monkeypatch, tmp_path):
    """pull.scope: the feedback of scope A never enters scope B's training data; null pulls every scope."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    qa = log_query(conn, "alice's question", cands(), "first-stage", scope="alice")
    qb = log_query(conn, "bob's question", cands(), "first-stage", scope="bob")
    record_feedback(conn, qa, used_chunk_ids=[101], rating=1)
    out = tmp_path / "fb"
    pull(PullParams(out=str(out), lag_seconds=0, scope="bob"))
    assert [r["query_id"] for r in read(out)] == [qb]
    record_feedback(conn, qa, used_chunk_ids=[102])  # alice's feedback moves on: bob's next pull still never sees it
    pull(PullParams(out=str(out), lag_seconds=0, scope="bob"))
    assert [r["query_id"] for r in read(out)] == [qb] and not any(c["used"] for c in read(out)[0]["candidates"])
    # a change of scope starts afresh: nothing of bob's stays in alice's file
    pull(PullParams(out=str(out), lag_seconds=0, scope="alice"))
    assert [r["query_id"] for r in read(out)] == [qa]
    pull(PullParams(out=str(out), lag_seconds=0))  # global learning: every scope
    assert sorted(r["query_id"] for r in read(out)) == sorted([qa, qb])


def test_pull_scope_must_be_a_scope_name():
    assert PullParams(scope="alice/notes").problems() == []
    for bad in ("..", "Alice", "a\x00b", "x" * 10_000, "\u0430lice"):
        (why,) = PullParams(scope=bad).problems()
        assert why.startswith("pull.scope") and "\n" not in why
