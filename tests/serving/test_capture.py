"""The service's capture: POST /capture and GET /capture/{id} over real HTTP against a real Postgres and the real
MiniLM, the worker (serving/capture.py) deciding behind them: 202 then the outcome, hostile input as one-line 4xx,
writes behind the token beyond loopback, a full queue as 429, counters in /stats, pending exchanges taken up again
after a restart, and noise prototypes learned by one service rejecting chatter in the next."""

import httpx
import pytest

from retrieval.conversation import intake
from retrieval.conversation.capture import CaptureParams
from retrieval.conversation.intake import Exchange
from retrieval.db import connect
from serving.server import BackgroundServer
from tests.waiting import wait_for

GH = "ghp_" + "Zq4Xw8Rt2Yu6Io0Pa3Sd7Fg1Hj5Kl9Mn2Bv6C"  # synthetic, as in tests/data/secrets_corpus.jsonl
REDIS = (
    "Redis keeps its whole dataset in memory and persists it to disk with RDB snapshots or an append-only file. "
    f"The staging Redis password is {GH} and it rotates every quarter."
)


@pytest.fixture
def serve(first_stage_service):
    def start(host="127.0.0.1", params=CaptureParams()):
        service = first_stage_service(host=host, capture=params)
        return BackgroundServer(service)

    return start


def outcome(client, cid, timeout=30.0):
    def decided():
        r = client.get(f"/capture/{cid}")
        assert r.status_code == 200, r.text
        return r.json() if r.json()["status"] != "pending" else None

    return wait_for(decided, timeout)


def test_capture_is_accepted_then_decided_and_its_facts_are_searchable(serve, db_url, all_text):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        r = client.post("/capture", json={"user": "tell me about redis", "assistant": REDIS, "session": "s1"})
        assert r.status_code == 202 and r.json()["status"] == "pending", r.text
        done = outcome(client, r.json()["id"])
        assert (done["status"], done["gate"], done["decided_by"], len(done["fact_ids"])) == (
            "stored",
            "store",
            "rules",
            2,
        )
        ok = client.post("/capture", json={"user": "thanks", "assistant": "You're welcome!"}).json()
        assert outcome(client, ok["id"])["gate"] == "prefilter"
        q = client.post("/query", json={"query": "how does redis persist data?"}).json()
        assert q["candidates"][0]["chunk_id"] in done["fact_ids"]
        stats = client.get("/stats").json()["capture"]
        assert (stats["stored"], stats["rejected"]["prefilter"], stats["facts_stored"]) == (1, 1, 2)
        assert client.get("/capture/999999").status_code == 404
    with connect(db_url) as conn:
        assert GH not in all_text(conn)


@pytest.mark.parametrize(
    "body,status,msg",
    [
        ({"user": "q", "assistant": "a\u0000b"}, 422, "assistant: Value error, contains a NUL"),
        ({"user": "q", "assistant": 5}, 422, "assistant:"),
        ({"user": ["q"], "assistant": "a"}, 422, "user:"),
        ({"assistant": "a"}, 422, "user: Field required"),
        ({"user": "q", "assistant": "   "}, 422, "must not be blank"),
        ({"user": "q", "assistant": "a", "kind": "fact"}, 422, "kind:"),
        ({"user": "q", "assistant": "a" * 1001}, 413, "over the 1,000-character limit"),
    ],
)
def test_hostile_bodies_are_one_line_4xx(serve, body, status, msg):
    with serve(params=CaptureParams(max_chars=1000)) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        r = client.post("/capture", json=body)
        assert r.status_code == status and msg in r.json()["error"] and "\n" not in r.json()["error"], r.text


def test_raw_hostile_bytes_and_ids_are_4xx(serve):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        for raw in (b'{"user": "\\ud800", "assistant": "x"}', b"\xff\xfe", b"[1, 2]", b"not json"):
            r = client.post("/capture", content=raw, headers={"content-type": "application/json"})
            assert 400 <= r.status_code < 500, (raw, r.text)
        r = client.post("/capture", content=b"x" * 2_000_001, headers={"content-type": "application/json"})
        assert r.status_code == 413
        for bad in ("0", "-1", "abc", str(2**63)):
            assert client.get(f"/capture/{bad}").status_code == 422


def test_capture_needs_the_write_token_beyond_loopback(serve, monkeypatch):
    monkeypatch.delenv("PAI_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("PAI_WRITE_TOKEN", "w-token")
    body = {"user": "q", "assistant": "ok"}
    with serve(host="0.0.0.0") as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        assert client.post("/capture", json=body).status_code == 401
        r = client.post("/capture", json=body, headers={"authorization": "Bearer w-token"})
        assert r.status_code == 202
        assert client.get(f"/capture/{r.json()['id']}").status_code == 401  # beyond loopback reading needs a token
        assert client.get(f"/capture/{r.json()['id']}", headers={"authorization": "Bearer w-token"}).status_code == 200


def test_pending_exchanges_are_taken_up_at_start(serve, db_url):
    with connect(db_url) as conn:  # left pending by a service that stopped before its worker got to them
        ids = [intake.submit(conn, Exchange("q", REDIS)), intake.submit(conn, Exchange("q", "thanks!"))]
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        assert [outcome(client, i)["status"] for i in ids] == ["stored", "rejected"]


def test_a_full_queue_is_429(serve, db_url):
    with serve(params=CaptureParams(max_pending=1)) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        with connect(db_url) as conn:  # one waiting (never handed to this worker, so it stays so)
            intake.submit(conn, Exchange("q", "thanks!"))
        r = client.post("/capture", json={"user": "q", "assistant": "ok"})
        assert r.status_code == 429 and "pending" in r.json()["error"]


def test_prototypes_learned_by_one_service_reject_chatter_in_the_next(serve):
    chatter = [
        f"I've updated {o} as you asked and pushed it to your branch. Let me know if you want me to {v} it as well. "
        f"Next I'll {v} the tests and then get back to you, once the whole suite has finished running."
        for o in ("the config loader", "the README", "the login handler", "the Dockerfile", "the CI workflow")
        for v in ("review", "rerun", "clean up", "check", "tidy up", "fix")
    ]
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        ids = [client.post("/capture", json={"user": "go", "assistant": t}).json()["id"] for t in chatter[:25]]
        assert {outcome(client, i)["gate"] for i in ids} == {"quality"}
        assert client.get("/stats").json()["capture"]["noise_version"] == 1
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:  # a new service, same database
        r = outcome(client, client.post("/capture", json={"user": "go", "assistant": chatter[29]}).json()["id"])
        assert (r["gate"], r["decided_by"]) == ("noise", "noise") and r["noise_score"] >= 0.35
        r = outcome(client, client.post("/capture", json={"user": "redis?", "assistant": REDIS}).json()["id"])
        assert r["status"] == "stored"
