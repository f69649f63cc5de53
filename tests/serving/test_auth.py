"""Who may call the service (serving/auth.py), over real HTTP against the real embedded Postgres: on loopback every
route is open; beyond it every route but /health needs a bearer token, the read token reads and cannot write,
the write token writes, no route added later is left open, and the service refuses to start with no token set."""

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from cli.main import app as cli
from serving.server import BackgroundServer, build_service

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def serve(first_stage_service):
    """f(host) -> a server of the first-stage service (it binds 127.0.0.1 whatever `host` the service believes)."""
    return lambda host="127.0.0.1": BackgroundServer(first_stage_service(host=host))


def note(client, source="bees", text="# Bees\n\nHoney bees store nectar as honey in wax combs.", **kw):
    r = client.post("/ingest", json={"source": source, "text": text}, **kw)
    return r


def test_writes_need_the_token_beyond_loopback(serve, monkeypatch):
    monkeypatch.delenv("PAI_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("PAI_READ_TOKEN", raising=False)
    monkeypatch.setenv("PAI_WRITE_TOKEN", "w-token")
    with serve(host="0.0.0.0") as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        for headers in (
            {},
            {"authorization": "Bearer wrong"},
            {"authorization": b"Bearer caf\xe9"},
            {"authorization": "w-token"},
        ):
            r = note(client, headers=headers)
            assert r.status_code == 401 and "bearer token" in r.json()["error"], r.text
        assert note(client, headers={"authorization": "Bearer w-token"}).status_code == 200
        q = client.post("/query", json={"query": "bees"}, headers={"authorization": "Bearer w-token"})
        assert q.status_code == 200  # the write token reads too
        fb = {"query_id": q.json()["query_id"], "rating": 1, "answer": "planted"}
        assert client.post("/feedback", json=fb).status_code == 401
        assert client.post("/feedback", json=fb, headers={"authorization": "Bearer w-token"}).status_code == 200
        # every POST route but /query is guarded, including ones added later
        paths = client.get("/openapi.json", headers={"authorization": "Bearer w-token"}).json()["paths"]
        posts = [p for p, ops in paths.items() if "post" in ops and p != "/query"]
        assert {"/ingest", "/feedback", "/selector/reload"} <= set(posts)
        for path in posts:
            assert client.post(path, json={}).status_code in (401, 403), path
        monkeypatch.setenv("PAI_ADMIN_TOKEN", "a-token")  # the admin token writes too
        assert note(client, source="ants", headers={"authorization": "Bearer a-token"}).status_code == 200
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:  # loopback: open as before
        assert note(client, source="local").status_code == 200


def test_reads_need_a_token_beyond_loopback(serve, monkeypatch):
    """A read of a memory layer is the leak: beyond loopback every route but /health needs a bearer token, the
    read token reads and cannot write, and no route added later is left open."""
    monkeypatch.delenv("PAI_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("PAI_READ_TOKEN", "r-token")
    monkeypatch.setenv("PAI_WRITE_TOKEN", "w-token")
    read, write = {"authorization": "Bearer r-token"}, {"authorization": "Bearer w-token"}
    with serve(host="0.0.0.0") as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        assert note(client, headers=write).status_code == 200
        assert client.get("/health").status_code == 200  # a probe needs no token
        routes = [
            (m.upper(), p.replace("{capture_id}", "1"))
            for p, ops in client.get("/openapi.json", headers=read).json()["paths"].items()
            for m in ops
        ] + [("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/no-such-route")]
        assert {("POST", "/query"), ("GET", "/stats"), ("GET", "/selector"), ("GET", "/capture/1")} <= set(routes)
        for method, path in routes:
            if path == "/health":
                continue
            for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": b"Bearer r-t\xf6ken"}):
                r = client.request(method, path, json={}, headers=headers)
                assert r.status_code == 401 and "bearer token" in r.json()["error"], (method, path, r.text)
                assert "\n" not in r.json()["error"]
        q = client.post("/query", json={"query": "honey bees"}, headers=read)
        assert q.status_code == 200 and q.json()["context"]
        assert client.get("/stats", headers=read).status_code == 200
        fb = {"query_id": q.json()["query_id"], "rating": 1}
        assert client.post("/feedback", json=fb, headers=read).status_code == 401  # reading is not writing
        assert note(client, source="wasps", headers=read).status_code == 401
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:  # loopback: open as before
        assert client.post("/query", json={"query": "honey bees"}).status_code == 200


def test_refuses_to_serve_beyond_loopback_without_a_token(monkeypatch):
    monkeypatch.delenv("PAI_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("PAI_READ_TOKEN", raising=False)
    monkeypatch.delenv("PAI_WRITE_TOKEN", raising=False)
    with pytest.raises(ValueError, match="beyond loopback"):
        build_service(REPO / "params.yaml", host="0.0.0.0")
    r = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--params", str(REPO / "params.yaml")])
    assert r.exit_code == 2 and "PAI_WRITE_TOKEN" in r.output and "Traceback" not in r.output


def test_non_ascii_bearer_on_an_admin_route_is_401(serve, monkeypatch):
    monkeypatch.setenv("PAI_ADMIN_TOKEN", "s3cret")
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        r = client.post("/selector/reload", headers={"authorization": b"Bearer caf\xe9"})
        assert r.status_code == 401 and "error" in r.json()
