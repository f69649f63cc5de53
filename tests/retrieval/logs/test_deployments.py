"""The deployment log in Postgres (retrieval/logs/deployments.py): announced versions newest first, what each service
did about one, the newest version a service applied before another, and the services listening for them."""

import psycopg

from retrieval.logs import deployments
from retrieval.logs.deployments import APP_NAME


def test_announcements_are_read_back_newest_first(conn):
    assert deployments.latest(conn) is None and deployments.deployments(conn) == []
    first = deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote", "manual promote")
    second = deployments.announce(conn, {"kind": "fixed", "version": "v2", "k": 5}, "promote")
    latest = deployments.latest(conn)
    assert (latest.id, latest.version, latest.record, latest.action, latest.reason) == (
        second,
        "v2",
        {"kind": "fixed", "version": "v2", "k": 5},
        "promote",
        None,
    )
    assert [d.id for d in deployments.deployments(conn)] == [second, first]
    assert [d.id for d in deployments.deployments(conn, limit=1)] == [second]


def test_last_good_is_the_newest_version_a_service_applied(conn):
    v1 = deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote")
    v2 = deployments.announce(conn, {"kind": "broken", "version": "v2"}, "promote")
    v3 = deployments.announce(conn, {"kind": "broken", "version": "v3"}, "promote")
    assert deployments.last_good(conn, v3) is None  # nothing applied yet
    assert deployments.record_apply(conn, v1, "svc-a", True, "ok") >= 0  # announce -> applied, in ms
    deployments.record_apply(conn, v2, "svc-a", False, "does not load")
    assert deployments.last_good(conn, v3).version == "v1" and deployments.last_good(conn, v1) is None
    (rejected,) = deployments.applies(conn, v2)
    assert (rejected["service"], rejected["ok"], rejected["detail"]) == ("svc-a", False, "does not load")


def test_waiting_for_applies_returns_when_the_services_answered_or_at_the_timeout(conn, db_url):
    dep = deployments.announce(conn, {"kind": "fixed", "version": "v1"}, "promote")
    deployments.record_apply(conn, dep, "svc-a", True, "ok")
    assert [a["service"] for a in deployments.wait_for_applies(conn, dep, 1, timeout_s=30)] == ["svc-a"]
    assert len(deployments.wait_for_applies(conn, dep, 2, timeout_s=0.2)) == 1  # the second never answers
    assert deployments.listening_services(conn) == 0
    with psycopg.connect(db_url, application_name=f"{APP_NAME}:test"):
        assert deployments.listening_services(conn) == 1
