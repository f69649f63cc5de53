"""The service over real HTTP (uvicorn on loopback) against a real Postgres and the real MiniLM."""

import json
import time

import httpx
import pytest

from serving.picker import Picker
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer
from tests.waiting import wait_for

NOTES = {
    "bees": "# Bees\n\nHoney bees collect nectar from flowers and store it as honey in wax combs.",
    "rivers": "# Rivers\n\nRivers carry fresh water from mountains down to the sea, shaping valleys.",
    "compilers": "# Compilers\n\nA compiler parses source code into a syntax tree and emits machine code.",
    "postgres": "# Postgres\n\nPostgreSQL stores rows in heap pages; B-tree indexes speed up lookups.",
}


class Reverse:
    answers_inline = False  # a slow selector: it refines in the background
    version = "test-reverse:1"

    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": list(range(len(cands), 0, -1))[:k]})


class Crash:
    answers_inline = False  # a slow selector: it refines in the background
    version = "test-crash:1"

    def answer(self, query, cands, k, query_vec=None):
        raise RuntimeError("model exploded")


class Hang:
    answers_inline = False  # a slow selector: it refines in the background
    version = "test-hang:1"

    def answer(self, query, cands, k, query_vec=None):
        time.sleep(3)
        return '{"selected": [1]}'


class Garbage:
    answers_inline = False  # a slow selector: it refines in the background
    version = "test-garbage:1"

    def answer(self, query, cands, k, query_vec=None):
        return "I like candidate number two the most!"


@pytest.fixture
def serve(first_stage_service):
    def start(selector=None, inline=False, timeout_s=5.0):
        service = first_stage_service(Picker(selector or FirstStageSelector(), timeout_s=timeout_s), inline=inline)
        return BackgroundServer(service)

    return start


def ingest_notes(client):
    for name, text in NOTES.items():
        r = client.post("/ingest", json={"source": name, "text": text})
        assert r.status_code == 200 and r.json()["chunks_inserted"] == 1, r.text


def test_query_feedback_and_rows(serve, conn):
    with serve(Reverse()) as srv, httpx.Client(base_url=srv.url) as client:
        assert client.get("/health").json()["status"] == "ok"
        ingest_notes(client)
        first = client.post("/query", json={"query": "how do bees make honey?"}).json()
        assert first["selector_version"] == "first-stage" and first["selection_status"] == "pending"
        assert first["context"][0]["source"] == "webhook:bees"
        assert [c["rank"] for c in first["candidates"]] == [1, 2, 3, 4]
        # the background selector's pick lands in the log ...
        status = wait_for(
            lambda: (
                (
                    s := conn.execute(
                        "SELECT selection_status FROM queries WHERE id = %s", (first["query_id"],)
                    ).fetchone()[0]
                )
                != "pending"
                and s
                or None
            )
        )
        assert status == "ok"
        picks = conn.execute(
            "SELECT rank, pick_rank FROM query_candidates WHERE query_id = %s ORDER BY rank", (first["query_id"],)
        ).fetchall()
        assert picks == [(1, 4), (2, 3), (3, 2), (4, 1)]
        # ... and serves the next same query (case and spacing ignored)
        again = client.post("/query", json={"query": "How do  bees make honey?"}).json()
        assert (again["selector_version"], again["selection_status"]) == ("test-reverse:1", "cached")
        assert [c["rank"] for c in again["context"]] == [4, 3, 2, 1]

        bees = first["context"][0]["chunk_id"]
        r = client.post(
            "/feedback",
            json={
                "query_id": first["query_id"],
                "used_chunk_ids": [bees],
                "rating": 1,
                "answer": "They store nectar as honey [1].",
            },
        )
        assert r.status_code == 200 and r.json()["used_ranks"] == [1]
        used = conn.execute(
            "SELECT rank, used FROM query_candidates WHERE query_id = %s ORDER BY rank", (first["query_id"],)
        ).fetchall()
        assert used == [(1, True), (2, False), (3, False), (4, False)]
        # a citation of no candidate is said, never a label, and the labels above stand
        r = client.post("/feedback", json={"query_id": first["query_id"], "answer": "See [99]."})
        assert r.status_code == 200 and r.json() == {
            "query_id": first["query_id"],
            "used_ranks": [],
            "not_shown": [],
            "unknown": [99],
            "answer_recorded": False,
            "replaced": {},
        }
        r = client.post("/feedback", json={"query_id": first["query_id"], "answer": "Rather [2].", "rating": -1})
        assert r.json()["replaced"] == {"used_ranks": [1], "rating": 1, "answer": "They store nectar as honey [1]."}
        r = client.post("/feedback", json={"query_id": first["query_id"], "answer": "They store nectar as honey [1]."})
        assert r.json()["replaced"] == {"used_ranks": [2], "answer": "Rather [2]."}
        r = client.post("/feedback", json={"query_id": first["query_id"], "rating": 1})
        assert r.json()["replaced"] == {"rating": -1}
        learned = client.post("/query", json={"query": "how do bees make honey"}).json()["learned"]
        assert learned and learned[0]["answer"] == "They store nectar as honey [1]."
        assert open(first["staging_file"]).read().startswith("# Query: how do bees make honey?")
        paths = client.get("/openapi.json").json()["paths"]
        assert {"/query", "/feedback", "/ingest", "/health", "/stats"} <= set(paths)
        stats = client.get("/stats").json()
        assert stats["queries"] == 3 and stats["learned_qa_count"] == 1 and stats["selector"]["cached"] >= 1


def test_bad_input_is_4xx_and_writes_nothing(serve, conn):
    with serve() as srv, httpx.Client(base_url=srv.url) as client:
        ingest_notes(client)
        qid = client.post("/query", json={"query": "rivers"}).json()["query_id"]
        before = conn.execute(
            "SELECT count(*), count(used), count(rating) FROM queries JOIN query_candidates ON id = query_id"
        ).fetchone()
        cases = [
            (
                client.post("/query", content=b"{not json", headers={"content-type": "application/json"}),
                400,
                "not a valid",
            ),
            (
                client.post("/query", content=b'{"query": "caf\xe9"}', headers={"content-type": "application/json"}),
                400,
                "UTF-8",
            ),
            (client.post("/query", json={"query": ""}), 422, "query"),
            (client.post("/feedback", json={"query_id": 99999, "used_chunk_ids": [1]}), 404, "unknown query id 99999"),
            (
                client.post("/feedback", json={"query_id": qid, "used_chunk_ids": [424242]}),
                422,
                "not among its candidates",
            ),
            (client.post("/feedback", json={"query_id": qid}), 422, "empty feedback"),
            (client.post("/feedback", json={"query_id": qid, "rating": 5}), 422, "rating"),
            (client.post("/ingest", json={"source": "big", "text": "x" * 2_100_000}), 413, "limit"),
            (client.post("/ingest", json={"source": "nul", "text": "a\x00b"}), 422, "NUL"),
        ]
        for r, code, msg in cases:
            assert r.status_code == code, (r.status_code, r.text)
            assert msg in r.json()["error"]
        after = conn.execute(
            "SELECT count(*), count(used), count(rating) FROM queries JOIN query_candidates ON id = query_id"
        ).fetchone()
        assert after == before
        assert conn.execute(
            "SELECT count(*) FROM documents WHERE source IN ('webhook:big', 'webhook:nul')"
        ).fetchone() == (0,)


@pytest.mark.parametrize("selector,count", [(Crash(), "error"), (Hang(), "timeout"), (Garbage(), "fallback")])
def test_a_failing_selector_still_answers_from_first_stage_order(serve, selector, count):
    with serve(selector, inline=True, timeout_s=0.5) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        ingest_notes(client)
        r = client.post("/query", json={"query": "how do bees make honey?"})
        assert r.status_code == 200
        body = r.json()
        assert body["selection_status"] == "fallback"
        assert [c["rank"] for c in body["context"]] == [1, 2, 3, 4]
        assert client.get("/stats").json()["selector"][count] == 1


class Empty:
    version = "test-empty:1"
    answers_inline = True

    def answer(self, query, cands, k, query_vec=None):
        return '{"selected": []}'  # valid JSON, parsed as "ok": the context's floor must still hold


def test_the_ranker_answers_a_new_query_inline_from_stored_vectors(serve, tmp_path, make_ranker):
    """The champion ranker serves the first query, not only its repeat; nothing is embedded on the query path."""
    from serving.ranker import RankerSelector

    ranker = RankerSelector(make_ranker(tmp_path / "ranker", {"similarity": 1.0, "bm25": 0.5}), "ranker:t")
    with serve(ranker) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        ingest_notes(client)
        for q in ("how do bees make honey?", "what shapes valleys?", "how does a compiler work?"):
            body = client.post("/query", json={"query": q}).json()
            assert (body["selector_version"], body["selection_status"]) == ("ranker:t", "ok"), body
            assert len(body["context"]) >= 3
        stats = client.get("/stats").json()
        assert stats["embedded_on_query_path"] == {"queries": 0, "candidates": 0}
        assert stats["selector"]["ok"] == 3 and "cached" not in stats["selector"]


def test_an_empty_pick_never_gives_an_empty_context(serve, conn):
    with serve(Empty()) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        ingest_notes(client)
        body = client.post("/query", json={"query": "how do bees make honey?"}).json()
        assert body["selector_version"] == "test-empty:1" and [c["rank"] for c in body["context"]] == [1, 2, 3]
        assert client.get("/stats").json()["selector"]["topped_up"] == 1
        shown = conn.execute(
            "SELECT rank FROM query_candidates WHERE query_id = %s AND pick_rank IS NOT NULL ORDER BY pick_rank",
            (body["query_id"],),
        ).fetchall()
        assert [r for (r,) in shown] == [1, 2, 3]  # the log records the context it was served
