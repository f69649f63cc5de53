"""A model trained for one store never serves another: two databases on the test's server (two stores), a version
record stamped with store A announced in B's deployment log is refused by B's service in one log line, and B's
`pai promote` of it (one MLflow registry shared by both) is refused before anything moves."""

import io
import json
import logging
import uuid

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from rich.console import Console

from eval import promotion, registry
from eval.evaluate import load_champion
from eval.registry import RegistryError, folder_record
from retrieval.db import connect, store_id
from retrieval.logs import deployments
from serving.hotswap import HotSwapper
from serving.picker import Picker
from serving.selectors import FirstStageSelector
from tests.waiting import wait_for


class Fixed:
    answers_inline = False

    def __init__(self, version):
        self.version = version

    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": list(range(len(cands), 0, -1))[:k]})


@pytest.fixture
def second_url(pg_server_url, template_db):
    """Another fresh database on the same server: another store."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name} TEMPLATE {template_db}")
    url = make_conninfo(pg_server_url, dbname=name)
    with connect(url) as conn:  # a template copy carries the template's identity: this store gets its own
        conn.execute("UPDATE store_identity SET id = gen_random_uuid()")
    yield url
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_service_on_store_b_refuses_a_model_trained_for_store_a(db_url, second_url, caplog):
    with connect(db_url) as a, connect(second_url) as b:
        store_a, store_b = store_id(a), store_id(b)
        assert store_a != store_b
        ours = deployments.announce(b, {"kind": "fixed", "version": "pai-selector:1", "store": store_b}, "deploy")
    picker = Picker(FirstStageSelector(), timeout_s=5)
    swapper = HotSwapper(
        picker, second_url, canary_timeout_s=5, grace_s=0, build=lambda r: Fixed(r["version"] + "@" + r["store"][:8])
    )
    swapper.start()
    try:
        wait_for(lambda: picker.selector.version == f"pai-selector:1@{store_b[:8]}")
        with caplog.at_level(logging.WARNING, logger="pai.hotswap"), connect(second_url) as b:
            # A's registry counts from 1 too: the same version name, another store's model
            theirs = deployments.announce(
                b, {"kind": "fixed", "version": "pai-selector:1", "store": store_a}, "promote"
            )
            (apply,) = wait_for(lambda: deployments.applies(b, theirs))
            assert deployments.applies(b, ours)[0]["ok"]
        assert (
            not apply["ok"]
            and apply["detail"] == f"pai-selector:1 was trained for store {store_a}, this is store {store_b}"
        )
        assert picker.selector.version == f"pai-selector:1@{store_b[:8]}"  # B's own model still serves
        (line,) = [r.getMessage() for r in caplog.records if "trained for store" in r.getMessage()]
        assert "\n" not in line and store_a in line
    finally:
        swapper.stop()


def test_promote_of_another_stores_model_is_refused_before_the_alias_moves(db_url, second_url, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))  # one home, one registry, two databases
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    folder = tmp_path / "ranker"
    folder.mkdir()
    np.save(folder / "adapter.npy", np.eye(3, dtype=np.float32))
    (folder / "ranker_config.json").write_text("{}")
    with connect(db_url) as a:
        store_a = store_id(a)
    with connect(second_url) as b:
        store_b = store_id(b)
    record = registry.register({**folder_record("ranker", folder), "store": store_a}, {})  # A's deploy
    promotion._set_champion(registry.client(), record, [record["registry_version"]])  # and A's champion
    assert registry.champion(store_a)["version"] == record["version"] == registry.champion()["version"]
    assert registry.champion(store_b) is None  # never B's baseline in evaluate, nor what B reverts to
    assert load_champion({}, Console(file=io.StringIO()), store_b) is None
    monkeypatch.setenv("DATABASE_URL", second_url)
    with pytest.raises(RegistryError, match=f"not moved: {record['version']} was trained for store {store_a}"):
        promotion.move_champion(record, "promote", "by hand", 0)
    with connect(second_url) as b:
        assert deployments.latest(b) is None  # nothing announced to B's services
    monkeypatch.setenv("DATABASE_URL", db_url)
    with pytest.raises(RegistryError, match="no trial"):
        promotion.start_trial({**record, "store": str(uuid.uuid4())}, None)
