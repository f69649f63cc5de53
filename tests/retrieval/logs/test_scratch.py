"""A lab run's scratch query log on a real Postgres: its queries, labels and learned answers stay in its own
schema, the user's log and pulls never see them, the user's queries made meanwhile survive its cleanup, and
the schema is gone however the run ends."""

import json
import threading
import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from retrieval.db import DatabaseError, connect
from retrieval.logs.feedback import learned_answers, log_query, record_feedback
from retrieval.logs.scratch import PREFIX, scratch_log
from retrieval.query.search import Candidate
from training.pull import PullParams, pull


def cands(n=3):
    return [
        Candidate(r, 100 + r, f"/d/{r}.md", "H", None, 1, 2, f"text {r}", f"h{r}", 1 - r / 10, 3)
        for r in range(1, n + 1)
    ]


def pulled(url, folder):
    pull(PullParams(out=str(folder), lag_seconds=0.0), url=url)
    return {r["query_id"]: r for r in map(json.loads, open(folder / "feedback.jsonl", encoding="utf-8"))}


def scratch_schemas(conn) -> int:
    (n,) = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", (PREFIX + "%",)).fetchone()
    return n


def test_a_lab_runs_traffic_stays_in_its_own_log(conn, db_url, tmp_path):
    before = log_query(conn, "the user's own question", cands(), "first-stage", threshold=0.2)
    with scratch_log(db_url) as lab:
        with connect(lab) as lc:
            mine = log_query(lc, "a lab question", cands(), "ranker:cycle1", picked=[2, 1], threshold=0.2)
            record_feedback(lc, mine, answer="From the notes [2]", rating=1)  # a thumbs-up plants a learned answer
            during = log_query(conn, "asked while the lab ran", cands(), "first-stage")  # a live service beside it
            assert learned_answers(lc, "a lab question") and not learned_answers(conn, "a lab question")
        user, labs = pulled(db_url, tmp_path / "user"), pulled(lab, tmp_path / "lab")
        assert set(user) == {before, during} and set(labs) == {mine}  # a pull beside the lab sees none of it
        assert [c["used"] for c in labs[mine]["candidates"]] == [False, True, None]  # [2] cited; rank 3 never shown
        assert mine not in (before, during)  # ids from the user's sequence: never the same query id twice
    # the cleanup dropped the lab's schema and nothing of the user's
    assert scratch_schemas(conn) == 0
    (queries,) = conn.execute("SELECT count(*) FROM queries").fetchone()
    (learned,) = conn.execute("SELECT count(*) FROM learned_qa").fetchone()
    assert (queries, learned) == (2, 0)


def test_the_scratch_log_is_dropped_when_the_run_fails(conn, db_url):
    with pytest.raises(RuntimeError, match="cycle 2 failed"), scratch_log(db_url) as lab:
        with connect(lab) as lc:
            log_query(lc, "a lab question", cands(), "first-stage")
        raise RuntimeError("cycle 2 failed")
    assert scratch_schemas(conn) == 0
    assert conn.execute("SELECT count(*) FROM queries").fetchone() == (0,)


def test_two_lab_runs_at_once_keep_apart(conn, db_url, tmp_path):
    with scratch_log(db_url) as a, scratch_log(db_url) as b:
        assert scratch_schemas(conn) == 2
        ids: dict[str, list[int]] = {a: [], b: []}

        def serve(url, n):
            with connect(url) as c:
                ids[url] += [log_query(c, f"{url[-12:]} question {i}", cands(), "first-stage") for i in range(n)]

        threads = [threading.Thread(target=serve, args=(url, n)) for url, n in ((a, 20), (b, 15))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(pulled(a, tmp_path / "a")) == set(ids[a]) and len(ids[a]) == 20
        assert set(pulled(b, tmp_path / "b")) == set(ids[b]) and len(ids[b]) == 15
    assert scratch_schemas(conn) == 0 and conn.execute("SELECT count(*) FROM queries").fetchone() == (0,)


def test_the_users_connection_options_are_kept(db_url):
    with scratch_log(make_conninfo(db_url, options="-c statement_timeout=5000")) as lab, connect(lab) as lc:
        assert lc.execute("SHOW statement_timeout").fetchone() == ("5s",)
        (path,) = lc.execute("SHOW search_path").fetchone()
        assert path.startswith(PREFIX)


def test_a_role_that_may_not_create_a_schema_gets_one_line(pg_server_url, db_url):
    role = f"lab_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        admin.execute(f"REVOKE CREATE ON DATABASE {psycopg.conninfo.conninfo_to_dict(db_url)['dbname']} FROM PUBLIC")
    try:
        with (
            pytest.raises(DatabaseError, match="may not create one") as e,
            scratch_log(make_conninfo(db_url, user=role)),
        ):
            pass
        assert "\n" not in str(e.value)
    finally:
        with psycopg.connect(db_url, autocommit=True) as admin:
            admin.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
            admin.execute(f"DROP OWNED BY {role}")
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f"DROP ROLE IF EXISTS {role}")
