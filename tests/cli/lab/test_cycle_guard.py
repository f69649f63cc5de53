"""The demo never runs in a user's memory: a store holding anything but SciFact is refused in one line."""

import os
from pathlib import Path

import pytest

from cli.lab.cycle import run_cycle
from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.params import IngestParams, SearchParams

REPO = Path(__file__).resolve().parents[3]


def test_the_demo_refuses_a_store_with_the_users_notes(conn, db_url, embedder, benchmark_dir, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    note = Document("notes/offsite.md", "/home/me/notes/offsite.md", "# Offsite\n\nWe meet in Lyon.", "markdown")
    ingest_documents(conn, [note], IngestParams(), SearchParams(), embedder)
    with pytest.raises(RuntimeError, match="holds 1 documents that are not the demo's.*never in your memory"):
        run_cycle(REPO / "params.yaml", benchmark_dir, "test", bar=None)
    (queries,) = conn.execute("SELECT count(*) FROM queries").fetchone()
    (docs,) = conn.execute("SELECT count(*) FROM documents").fetchone()
    assert (queries, docs) == (0, 1)  # nothing ingested, nothing replayed


def test_the_demo_runs_in_the_checkouts_home_not_the_users(monkeypatch, tmp_path):
    from cli.lab.cycle import demo_home

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "chosen"))
    assert demo_home() is None and os.environ["PAI_HOME"] == str(tmp_path / "chosen")  # an explicit home is kept
    monkeypatch.delenv("PAI_HOME")
    assert demo_home() == tmp_path / ".pai" and os.environ["PAI_HOME"] == str(tmp_path / ".pai")


def test_with_database_url_set_the_demo_uses_a_database_of_its_own(conn, db_url, monkeypatch):
    """A user on their own PostgreSQL (DATABASE_URL): the demo creates and uses pai_lab_demo on that server, so
    the guard above never even sees the user's store; a second run reuses it."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from cli.lab.cycle import DEMO_DATABASE, demo_database
    from retrieval.db import DatabaseError

    monkeypatch.setenv("DATABASE_URL", db_url)
    try:
        assert demo_database() == DEMO_DATABASE
        assert conninfo_to_dict(os.environ["DATABASE_URL"])["dbname"] == DEMO_DATABASE
        assert demo_database() is None  # already the demo's
        monkeypatch.setenv("DATABASE_URL", db_url)
        assert demo_database() == DEMO_DATABASE  # exists: reused, not created again
        (docs,) = conn.execute("SELECT count(*) FROM documents").fetchone()
        assert docs == 0
    finally:
        with psycopg.connect(db_url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DEMO_DATABASE} WITH (FORCE)")
    monkeypatch.setenv("DATABASE_URL", make_conninfo(db_url, port="1", password="s3cret"))
    with pytest.raises(DatabaseError, match="could not create database pai_lab_demo") as e:
        demo_database()
    assert "s3cret" not in str(e.value)
