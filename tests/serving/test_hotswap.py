"""Hot-swap against a real Postgres and a real service over HTTP: announce -> load -> canary -> swap;
a selector that does not load or fails its canary never serves."""

import json
import threading
import time

import httpx
import pytest

from retrieval.db import connect
from retrieval.logs import deployments
from retrieval.params import SearchParams
from serving.hotswap import HotSwapper
from serving.interface import SelectorLoadError
from serving.picker import Picker
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer
from tests.waiting import wait_for


class Fixed:
    """Always picks the last `k` candidates, in reverse: easy to tell from the first-stage order."""

    answers_inline = False  # a slow selector: it refines in the background

    def __init__(self, version):
        self.version = version

    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": list(range(len(cands), 0, -1))[:k]})


class Garbage(Fixed):
    def answer(self, query, cands, k, query_vec=None):
        return "candidate two, I think"


def build(record):
    if record["kind"] == "broken":
        raise SelectorLoadError(f"GGUF does not load: {record['version']}")
    if record["kind"] == "crashing":  # a malformed record some loader does not foresee
        raise TypeError("float() argument must be a string or a real number, not 'NoneType'")
    return {"fixed": Fixed, "garbage": Garbage}[record["kind"]](record["version"])


@pytest.fixture
def service(db_url, first_stage_service):
    picker = Picker(FirstStageSelector(), timeout_s=5)
    svc = first_stage_service(
        picker,
        inline=True,
        swapper=HotSwapper(picker, db_url, canary_timeout_s=5, grace_s=0, build=build),
    )
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for name in ("bees", "rivers", "compilers"):
            client.post(
                "/ingest", json={"source": name, "text": f"# {name}\n\nA note about {name} and how they work."}
            ).raise_for_status()
        yield client


def test_announced_version_is_swapped_in_and_tags_responses_and_feedback(service, db_url):
    assert service.get("/selector").json()["version"] == "first-stage"
    with connect(db_url) as conn:
        dep = deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote")
        wait_for(lambda: service.get("/selector").json()["version"] == "v1")
        r = service.post("/query", json={"query": "how do bees work?"}).json()
        assert r["selector_version"] == "v1" and r["active_selector"] == "v1"
        assert [c["rank"] for c in r["context"]] == sorted((c["rank"] for c in r["candidates"]), reverse=True)[
            : len(r["context"])
        ]
        (logged,) = conn.execute("SELECT selector_version FROM queries WHERE id = %s", (r["query_id"],)).fetchone()
        assert logged == "v1"
        (apply,) = deployments.applies(conn, dep)
        assert apply["ok"] and apply["swap_ms"] > 0 and "canary 3/3 ok" in apply["detail"]


@pytest.mark.parametrize(
    "kind,why",
    [
        ("broken", "load: GGUF does not load"),
        ("crashing", "load: TypeError: float() argument"),  # the listener lives on and follows later versions
        ("garbage", "canary: unusable answer"),
    ],
)
def test_a_selector_that_fails_to_load_or_its_canary_never_serves(service, db_url, kind, why):
    with connect(db_url) as conn:
        deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote")
        wait_for(lambda: service.get("/selector").json()["version"] == "v1")
        bad = deployments.announce(conn, {"kind": kind, "version": "v2"}, "promote")
        (apply,) = wait_for(lambda: deployments.applies(conn, bad))
        assert not apply["ok"] and apply["detail"].startswith(why)
        status = service.get("/selector").json()
        assert status["version"] == "v1" and "rejected" in status["last_error"]
        assert service.post("/query", json={"query": "rivers"}).json()["selector_version"] == "v1"
        # a later good version still goes through
        deployments.announce(conn, {"kind": "fixed", "version": "v3"}, "promote")
        wait_for(lambda: service.get("/selector").json()["version"] == "v3")


def test_at_start_a_bad_newest_version_falls_back_to_the_last_good_one(db_url, embedder, tmp_path):
    with connect(db_url) as conn:
        good = deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote")
        deployments.record_apply(conn, good, "earlier-service", True, "ok")
        deployments.announce(conn, {"kind": "broken", "version": "v2"}, "promote")
    picker = Picker(FirstStageSelector(), timeout_s=5)
    swapper = HotSwapper(picker, db_url, canary_timeout_s=5, grace_s=0, build=build).start()
    try:
        wait_for(lambda: picker.selector.version == "v1")
    finally:
        swapper.stop()


def test_admin_routes_need_the_token_beyond_loopback(db_url, first_stage_service, monkeypatch):
    picker = Picker(FirstStageSelector(), timeout_s=5)
    svc = first_stage_service(
        picker,
        search=SearchParams(),
        swapper=HotSwapper(picker, db_url, build=build),
        host="0.0.0.0",
    )
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        monkeypatch.delenv("PAI_ADMIN_TOKEN", raising=False)
        r = client.post("/selector/reload")
        assert r.status_code == 403 and "PAI_ADMIN_TOKEN" in r.json()["error"]
        monkeypatch.setenv("PAI_ADMIN_TOKEN", "s3cret")
        assert client.post("/selector/reload").status_code == 401
        assert client.post("/selector/reload", headers={"authorization": "Bearer wrong"}).status_code == 401
        r = client.post("/selector/reload", headers={"authorization": "Bearer s3cret"})
        assert r.status_code == 200 and r.json()["reloading"] is True
        assert client.get("/selector").status_code == 401  # beyond loopback reading needs a token too
        assert client.get("/selector", headers={"authorization": "Bearer s3cret"}).status_code == 200


class First(Fixed):
    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": [1]})


def test_cascade_answers_with_the_fast_selector_and_caches_the_slow_ones_pick(db_url, first_stage_service):
    from serving.selectors import CascadeSelector

    cascade = CascadeSelector(First("ranker:1"), Fixed("llm:1"))
    # background mode: only the cascade's fast side runs inline
    svc = first_stage_service(Picker(cascade, timeout_s=5))
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for name in ("bees", "rivers", "compilers"):
            client.post(
                "/ingest", json={"source": name, "text": f"# {name}\n\nA note about {name} and how they work."}
            ).raise_for_status()
        first = client.post("/query", json={"query": "how do bees work?"}).json()
        assert (first["selector_version"], first["selection_status"]) == ("ranker:1", "ok")
        # the fast side picked one: the floor (min_chunks 3) tops it up from the first-stage order
        assert [c["rank"] for c in first["context"]] == [1, 2, 3] and first[
            "active_selector"
        ] == "cascade(ranker:1>llm:1)"
        with connect(db_url) as conn:  # the slow pick is logged against the query, by name
            wait_for(
                lambda: (
                    conn.execute("SELECT picked_by FROM queries WHERE id = %s", (first["query_id"],)).fetchone()[0]
                    == "llm:1"
                )
            )
        again = client.post("/query", json={"query": "How do bees  work?"}).json()
        n = len(again["candidates"])
        assert (again["selector_version"], again["selection_status"]) == ("llm:1", "cached")
        assert [c["rank"] for c in again["context"]] == list(range(n, 0, -1))[: len(again["context"])]


def test_not_ready_until_the_champion_is_loaded(db_url, first_stage_service):
    """A fresh service says "loading" (503) and serves no query until the announced champion is loaded: the
    first-stage order it starts on never answers in its place."""
    gate = threading.Event()

    def slow_build(record):
        gate.wait(60)
        return build(record)

    with connect(db_url) as conn:
        deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote")
    picker = Picker(FirstStageSelector(), timeout_s=1)
    svc = first_stage_service(
        picker, inline=True, swapper=HotSwapper(picker, db_url, canary_timeout_s=5, grace_s=0, build=slow_build)
    )
    try:
        with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            h = client.get("/health")
            assert h.status_code == 503 and h.json()["status"] == "loading" and h.json()["selector"] == "first-stage"
            # writes go on while it loads
            client.post("/ingest", json={"source": "bees", "text": "# bees\n\nA note about bees."}).raise_for_status()
            t0 = time.monotonic()
            r = client.post("/query", json={"query": "how do bees work?"})
            assert time.monotonic() - t0 >= 0.9  # it waited for the champion, then gave up
            assert r.status_code == 503 and r.json()["error"].startswith("loading:") and r.headers["retry-after"]
            with connect(db_url) as conn:
                (logged,) = conn.execute("SELECT count(*) FROM queries").fetchone()
            assert logged == 0  # nothing served, nothing logged
            gate.set()
            wait_for(lambda: client.get("/health").status_code == 200)
            h = client.get("/health").json()
            assert h["status"] == "ok" and h["selector"] == "v1"
            assert client.post("/query", json={"query": "how do bees work?"}).json()["selector_version"] == "v1"
    finally:
        gate.set()


def test_ready_when_the_newest_champion_is_rejected(db_url, first_stage_service):
    """Caught up means decided: a champion that fails to load leaves the service ready on what it had, and
    /health says why."""
    with connect(db_url) as conn:
        deployments.announce(conn, {"kind": "broken", "version": "v1"}, "promote")
    picker = Picker(FirstStageSelector(), timeout_s=5)
    swapper = HotSwapper(picker, db_url, canary_timeout_s=5, grace_s=0, build=build)
    svc = first_stage_service(picker, swapper=swapper)
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        wait_for(lambda: client.get("/health").status_code == 200)
        h = client.get("/health").json()
        assert h["selector"] == "first-stage" and "rejected" in h["last_error"]
