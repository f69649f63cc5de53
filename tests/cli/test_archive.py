"""`pai export` / `pai import` end to end: a store ingested with `pai ingest`, a selector registry with two versions
(one deleted, so numbers have a gap) and a deployment naming the champion's files, exported from one home and
PostgreSQL database and imported into another; a bad archive or a full store is one line and changes nothing."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from cli.main import app
from eval import registry
from retrieval.db import connect

runner = CliRunner()


@pytest.fixture
def other_url(pg_server_url, template_db):
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name} TEMPLATE {template_db}")
    url = make_conninfo(pg_server_url, dbname=name)
    with psycopg.connect(url, autocommit=True) as c:  # a clone of the template would share its identity
        c.execute("UPDATE store_identity SET id = gen_random_uuid()")
    yield url
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def ranker(folder, weight: float) -> dict:
    folder.mkdir(parents=True)
    (folder / "ranker_config.json").write_text(json.dumps({"dataset_sha256": "d"}))
    (folder / "weights.json").write_text(json.dumps({"w": [weight, 0.5]}))
    return registry.folder_record("ranker", folder)


def test_export_then_import_into_another_home_and_database(db_url, other_url, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home_a"))
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(5):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nHoney bees and rivers, number {i}.\n")
    assert runner.invoke(app, ["ingest", str(notes)]).exit_code == 0
    first = registry.register(ranker(tmp_path / "r1", 1.0), {})
    champion = registry.register(ranker(tmp_path / "r2", 2.0), {"recall": 0.5})
    registry.client().delete_model_version(registry.MODEL, first["registry_version"])
    registry.client().set_registered_model_alias(registry.MODEL, "champion", champion["registry_version"])
    with connect(db_url) as conn:
        conn.execute(
            "INSERT INTO selector_deployments (version, record, action) VALUES (%s, %s, 'promote')",
            (champion["version"], json.dumps(champion)),
        )
    archive = tmp_path / "memory.tgz"
    r = runner.invoke(app, ["export", str(archive)])
    assert r.exit_code == 0, r.output
    assert "registry files" in r.output
    assert runner.invoke(app, ["export", str(archive)]).exit_code == 2  # no silent overwrite

    monkeypatch.setenv("DATABASE_URL", other_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home_b"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # mlflow exports the one it was given
    r = runner.invoke(app, ["import", str(archive)])
    assert r.exit_code == 0, r.output
    home_b = str((tmp_path / "home_b").resolve())
    got = registry.record_of("champion")
    assert got["registry_version"] == champion["registry_version"] == "2"
    assert got["model_dir"].startswith(home_b) and got["model_sha256"] == champion["model_sha256"]
    registry.verify(got)  # the files are there, by content
    with connect(other_url) as conn, connect(db_url) as src:
        (record,) = conn.execute("SELECT record FROM selector_deployments").fetchone()
        assert record["model_dir"] == got["model_dir"]
        same = "SELECT id, source, scope, written_at, content_hash FROM documents ORDER BY id"
        assert conn.execute(same).fetchall() == src.execute(same).fetchall()
        same = "SELECT id, document_id, embedding::text FROM chunks ORDER BY id"
        assert conn.execute(same).fetchall() == src.execute(same).fetchall()
    # again: the store and the registry are full now
    r = runner.invoke(app, ["import", str(archive)])
    assert r.exit_code == 2 and "holds versions already" in r.output
    (tmp_path / "junk.tgz").write_bytes(b"\x1f\x8b" + b"\x00" * 100)
    r = runner.invoke(app, ["import", str(tmp_path / "junk.tgz"), "--into-any"])
    assert r.exit_code == 2 and "not a pai archive" in r.output and len(r.output.strip().splitlines()) == 1
    with connect(other_url) as conn:
        assert conn.execute("SELECT count(*) FROM store_imports").fetchone() == (1,)
