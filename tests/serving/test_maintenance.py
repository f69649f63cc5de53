"""Maintenance inside the service: it runs on its schedule in a thread beside the queries, reports
on /stats, and skips a round while another service's run holds the lock."""

import httpx

from retrieval.db import connect
from retrieval.ops import maintain
from retrieval.params import MaintainParams
from serving.picker import Picker
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer
from serving.service import Service
from tests.waiting import wait_for


def service(first_stage_service, tmp_path, interval_minutes: float) -> Service:
    return first_stage_service(
        Picker(FirstStageSelector()),
        maintain=MaintainParams(interval_minutes=interval_minutes, feedback=str(tmp_path / "feedback")),
    )


def test_scheduled_run_cleans_up_while_queries_are_served(first_stage_service, tmp_path):
    old = tmp_path / "staging" / "2020-05-05" / "000000-old-q.md"
    old.parent.mkdir(parents=True)
    old.write_text("old\n")
    svc = service(first_stage_service, tmp_path, interval_minutes=0.01)  # every 0.6 s
    with BackgroundServer(svc) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        assert client.post("/ingest", json={"source": "bees", "text": "Bees make honey."}).status_code == 200
        report = wait_for(lambda: svc.maintenance.last, timeout=20.0)
        assert report["skipped"] is None and report["staging_deleted"] == 1 and not old.exists()
        for _ in range(3):  # queries go on between and during runs
            assert client.post("/query", json={"query": "who makes honey?"}).status_code == 200
        stats = client.get("/stats").json()
        assert stats["maintenance"]["dry_run"] is False and "usage" in stats["maintenance"]
    assert not svc.maintenance._thread.is_alive()  # stopped with the app


def test_off_by_interval_zero_and_skips_while_locked(db_url, first_stage_service, tmp_path):
    svc = service(first_stage_service, tmp_path, interval_minutes=0)
    with BackgroundServer(svc) as srv:
        assert not svc.maintenance._thread.is_alive() and httpx.get(f"{srv.url}/stats").json()["maintenance"] is None
    svc = service(first_stage_service, tmp_path, interval_minutes=0.01)
    with connect(db_url) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (maintain.LOCK_ID,))  # another service's run
        with BackgroundServer(svc):
            report = wait_for(lambda: svc.maintenance.last, timeout=20.0)
            assert report["skipped"] == "another maintenance run holds the lock"
