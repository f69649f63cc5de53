"""Building the service from params and running it (serving/server.py): a pinned selector serves at once, none
follows the announced champion; the background server answers on a free loopback port until it is stopped."""

import socket
from pathlib import Path

import httpx

from retrieval.params import SearchParams, load_section
from serving.selectors import SimilaritySelector
from serving.server import BackgroundServer, build_service, free_port

REPO = Path(__file__).resolve().parents[2]


def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_service_built_from_params_serves_until_stopped(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    params = REPO / "params.yaml"
    pinned = build_service(params, selector=SimilaritySelector(), staging_dir=tmp_path / "st", inline=True)
    assert pinned.search == load_section(params, "search", SearchParams) and pinned.db_url == db_url
    assert pinned.staging.path() == (tmp_path / "st").resolve() and pinned.inline
    assert pinned.swapper is None and pinned.ready()  # pinned: nothing to catch up with
    assert build_service(params, staging_dir=tmp_path / "st").swapper is not None  # follows the champion
    with BackgroundServer(pinned) as server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        r = httpx.get(f"{server.url}/health", timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "ok"
    assert not server.thread.is_alive()
