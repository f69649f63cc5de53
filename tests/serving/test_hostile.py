"""The service as a hostile client meets it, over real HTTP against the real embedded Postgres:
client mistakes are one-line 4xx (never 5xx), the body limit holds for chunked bodies, feedback is
per-query state, and no entry point stores a secret. Tokens beyond loopback: tests/serving/test_auth.py."""

import json
from pathlib import Path

import httpx
import pytest

from retrieval.params import IngestParams
from serving.server import BackgroundServer
from training.pull import PullParams, pull

REPO = Path(__file__).resolve().parents[2]
CORPUS = [json.loads(line) for line in open(REPO / "tests" / "data" / "secrets_corpus.jsonl")]
GH = "ghp_" + "Zq4Xw8Rt2Yu6Io0Pa3Sd7Fg1Hj5Kl9Mn2Bv6C"  # synthetic, as in the corpus


@pytest.fixture
def serve(first_stage_service):
    def start(host="127.0.0.1", ingest=IngestParams()):
        service = first_stage_service(ingest=ingest, host=host)
        return BackgroundServer(service)  # binds 127.0.0.1 whatever `host` the service believes it has

    return start


def note(client, source="bees", text="# Bees\n\nHoney bees store nectar as honey in wax combs.", **kw):
    r = client.post("/ingest", json={"source": source, "text": text}, **kw)
    return r


def test_client_mistakes_are_one_line_4xx_and_write_nothing(serve, conn):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        assert note(client).status_code == 200
        qid = client.post("/query", json={"query": "bees"}).json()["query_id"]
        before = conn.execute(
            "SELECT (SELECT count(*) FROM queries), (SELECT count(rating) FROM queries),"
            " (SELECT count(*) FROM documents), (SELECT count(*) FROM learned_qa)"
        ).fetchone()

        def raw(path, body: bytes, **kw):
            return client.post(path, content=body, headers={"content-type": "application/json"}, **kw)

        def chunked():
            for _ in range(30):
                yield b"x" * 100_000

        cases = [
            (client.post("/query", json={"query": "a\x00b"}), 422),
            (raw("/query", b'{"query": "half \\ud800 pair"}'), 422),
            (client.post("/query", json={"query": "   "}), 422),
            (client.post("/query", json={"query": "bees", "inline": "yes"}), 422),
            (client.post("/feedback", json={"query_id": qid, "answer": "a\x00b"}), 422),
            (client.post("/feedback", json={"query_id": qid, "correction": "c\x00"}), 422),
            (client.post("/feedback", json={"query_id": True, "rating": 1}), 422),
            (client.post("/feedback", json={"query_id": str(qid), "rating": 1}), 422),
            (client.post("/feedback", json={"query_id": qid, "rating": True}), 422),
            (client.post("/feedback", json={"query_id": qid, "used_chunk_ids": ["1"]}), 422),
            (client.post("/feedback", json={"query_id": 2**70, "rating": 1}), 422),
            (client.post("/feedback", json={"query_id": -1, "rating": 1}), 422),
            (client.post("/ingest", json={"source": "s\x00", "text": "t"}), 422),
            (client.post("/ingest", json={"source": "s", "text": "t", "title": "t\x00"}), 422),
            (client.post("/ingest", json={"source": "s", "text": " \n "}), 422),
            (client.post("/ingest", json={"source": 5, "text": "t"}), 422),
            (client.post("/ingest", json={"source": f"deploy api_key={GH}", "text": "t"}), 422),
            (client.post("/feedback", json={"query_id": qid, "correction": "   "}), 422),
            (client.post("/feedback", json={"query_id": qid, "used_chunk_id": [1], "rating": 1}), 422),  # misspelt
            (client.post("/query", json={"query": "bees", "top_k": 50}), 422),
            (client.post("/ingest", json={"source": "s", "text": "t", "tags": ["x"]}), 422),
            (client.post("/feedback", json={"query_id": qid, "answer": "", "rating": 1}), 422),
            (raw("/ingest", b'{"source": "s", "text": "\\udfff"}'), 422),
            (client.post("/ingest", content=chunked(), headers={"content-type": "application/json"}), 413),
            (client.post("/feedback", content=chunked(), headers={"content-type": "application/json"}), 413),
        ]
        for i, (r, code) in enumerate(cases):
            assert r.status_code == code, (i, r.status_code, r.text)
            body = r.json()
            assert list(body) == ["error"] and "\n" not in body["error"], (i, body)
        after = conn.execute(
            "SELECT (SELECT count(*) FROM queries), (SELECT count(rating) FROM queries),"
            " (SELECT count(*) FROM documents), (SELECT count(*) FROM learned_qa)"
        ).fetchone()
        assert after == before


def test_a_megabyte_single_line_note_is_ingested_in_pieces(serve, conn, invariant_breaks):
    text = " ".join(f"w{i}" for i in range(260_000)) + " zqlongmarker"
    assert len(text) > 1_600_000 and "\n" not in text
    # big chunks keep it to ~20 chunks to embed; at the default 200 tokens it is ~2,000 (minutes of CPU)
    with serve(ingest=IngestParams(chunk_tokens=20_000)) as srv, httpx.Client(base_url=srv.url, timeout=300) as client:
        r = note(client, source="wide", text=text)
        assert r.status_code == 200, r.text
        assert r.json()["chunks_inserted"] >= 20
    assert invariant_breaks(conn) == []
    (hits,) = conn.execute(
        "SELECT count(*) FROM chunk_terms WHERE tsv @@ plainto_tsquery('english', 'zqlongmarker')"
    ).fetchone()
    assert hits == 1


def test_feedback_is_per_query_state(serve, conn, tmp_path, monkeypatch, db_url):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        note(client)
        note(client, source="wasps", text="# Wasps\n\nWasps build paper nests from chewed wood.")
        q = client.post("/query", json={"query": "how do bees make honey?"}).json()
        bees, wasps = (c["chunk_id"] for c in q["candidates"][:2])
        up = {"query_id": q["query_id"], "rating": 1, "answer": "Nectar becomes honey [1].", "used_chunk_ids": [bees]}
        for _ in range(3):
            assert client.post("/feedback", json=up).status_code == 200
        assert conn.execute("SELECT quality_score FROM learned_qa").fetchall() == [(1,)]
        down = {"query_id": q["query_id"], "rating": -1, "used_chunk_ids": [wasps]}
        for _ in range(2):
            assert client.post("/feedback", json=down).status_code == 200
        assert conn.execute("SELECT rating FROM queries WHERE id = %s", (q["query_id"],)).fetchone() == (-1,)
        assert conn.execute("SELECT count(*) FROM learned_qa").fetchone() == (0,)  # the taken-back thumbs-up planted it
        assert client.post("/feedback", json=up).status_code == 200
        assert conn.execute("SELECT quality_score FROM learned_qa").fetchall() == [(1,)]
        # a second query with the same text adds its own thumbs-up, once
        q2 = client.post("/query", json={"query": "how do bees make honey?"}).json()
        for _ in range(2):
            client.post("/feedback", json={**up, "query_id": q2["query_id"]})
        assert conn.execute("SELECT quality_score FROM learned_qa").fetchall() == [(2,)]
    monkeypatch.setenv("DATABASE_URL", db_url)
    metrics = pull(PullParams(out=str(tmp_path / "fb"), lag_seconds=0))
    records = [json.loads(line) for line in open(tmp_path / "fb" / "feedback.jsonl")]
    assert metrics["thumbs_up"] == 2 and len(records) == 2  # one state per query, not one row per post
    first = next(r for r in records if r["query_id"] == q["query_id"])
    assert [c["used"] for c in first["candidates"][:2]] == [True, False]  # one label per candidate: the latest


def test_no_secret_is_stored_or_served_from_the_service(serve, conn, all_text):
    secrets = [s for e in CORPUS for s in e["secrets"]]
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=120) as client:
        for e in CORPUS:  # webhook: secrets in the text, the title and the source name
            first = e["text"].split("\n")[0][:200]
            r = client.post("/ingest", json={"source": f"{e['id']} {first}", "title": first, "text": e["text"]})
            if r.status_code == 422:  # a name holding a secret is refused: two such would overwrite each other
                why = r.json()["error"]  # what to do, and the name as it would be stored: no secret in it
                assert why.startswith("source: part of it reads as a secret (") and "name the note in plain" in why
                r = client.post("/ingest", json={"source": e["id"], "title": first, "text": e["text"]})
            assert r.status_code == 200, r.text
            assert not any(s in r.text for s in secrets)
        staged = []
        for e in CORPUS:  # queries carrying secrets: the log and the staging file
            r = client.post("/query", json={"query": f"what is this: {e['text']}"[:4000]})
            assert r.status_code == 200
            staged.append(Path(r.json()["staging_file"]).read_text())
            assert not any(s in r.text for s in secrets), e["id"]
        # the case: a thumbs-up answer holding a DB URI and a GitHub token, served as learned Q&A
        qid = client.post("/query", json={"query": "how do I reach the orders database?"}).json()["query_id"]
        answer = f"Use postgresql://app:Wv7Kp2Qz9x@db.internal:5432/app with token {GH} [1]"
        assert (
            client.post(
                "/feedback",
                json={
                    "query_id": qid,
                    "rating": 1,
                    "answer": answer,
                    "correction": f"or redis://:Rz7uQp2mVx9w@cache.internal, token {GH}",
                },
            ).status_code
            == 200
        )
        learned = client.post("/query", json={"query": "how do I reach the orders database"}).json()["learned"]
        assert learned and "[REDACTED:" in learned[0]["answer"]
        served = json.dumps(learned)
    stored = all_text(conn)
    for s in secrets:
        assert s not in stored and s not in served and not any(s in f for f in staged), s
