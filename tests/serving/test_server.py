"""Building the service from params and running it (serving/server.py): a pinned selector serves at once, none
follows the announced champion; the background server answers on a free loopback port until it is stopped."""

import socket
from pathlib import Path
from types import SimpleNamespace

import httpx

from retrieval.params import SearchParams, load_section
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer, build_service, free_port

REPO = Path(__file__).resolve().parents[2]


def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_service_built_from_params_serves_until_stopped(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    params = REPO / "params.yaml"
    pinned = build_service(params, selector=FirstStageSelector(), staging_dir=tmp_path / "st", inline=True)
    assert pinned.search == load_section(params, "search", SearchParams) and pinned.db_url == db_url
    assert pinned.staging.path() == (tmp_path / "st").resolve() and pinned.inline
    assert pinned.swapper is None and pinned.ready()  # pinned: nothing to catch up with
    assert build_service(params, staging_dir=tmp_path / "st").swapper is not None  # follows the champion
    with BackgroundServer(pinned) as server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        r = httpx.get(f"{server.url}/health", timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "ok"
    assert not server.thread.is_alive()


def test_a_seeded_service_explores_the_same_way_twice(db_url, tmp_path, monkeypatch):
    """`explore_seed` (the lab loop's replays): the same draws for the same queries; unseeded, a user's service
    draws afresh."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    params = tmp_path / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text().replace("explore_rate: 0.05 ", "explore_rate: 0.5 "))
    assert load_section(params, "search", SearchParams).explore_rate == 0.5

    shown = [SimpleNamespace(chunk_id=r, rank=r) for r in range(1, 21)]

    def draws(seed):
        svc = build_service(params, FirstStageSelector(), inline=True, staging_dir=tmp_path / "st", explore_seed=seed)
        return [svc.picker.expose(shown[:5], shown)[2] for _ in range(40)]  # the explored rank, or None

    first = draws(7)
    assert first == draws(7) != draws(8) and 5 < sum(r is not None for r in first) < 35
