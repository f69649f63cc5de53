"""Least privilege on a shared Postgres, as a team runs it: an administrator creates the extensions, the owner
runs `pai migrate --grant`, and a DML-only role ingests, queries, serves, takes feedback and maintains. A role
missing a right gets one line naming it and the command that fixes it, never a traceback.

Real roles and real grants, on two servers: the session's embedded PostgreSQL 18, and a throwaway cluster of
Debian's packaged PostgreSQL 15 with pgvector built for it (`bash .ci/pg15`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from cli.main import app as cli
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import DatabaseError, connect
from retrieval.ops import maintain
from retrieval.params import IngestParams, MaintainParams, SearchParams
from retrieval.query.search import search
from serving.server import BackgroundServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["embedded", "debian-15"])
def server_url(request):
    """A superuser URL on each server: a team's Postgres is rarely the embedded one."""
    return request.getfixturevalue({"embedded": "pg_server_url", "debian-15": "debian15_url"}[request.param])


@pytest.fixture
def shared(server_url):
    """A database owned by a non-superuser owner, the extensions pre-created by the administrator; a DML-only
    runtime role and a role with no rights. Yields their URLs."""
    tag = uuid.uuid4().hex[:8]
    owner, runtime, nobody, db = f"own_{tag}", f"rt_{tag}", f"no_{tag}", f"shared_{tag}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        for role in (owner, runtime, nobody):
            admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {db} OWNER {owner}")
    with psycopg.connect(make_conninfo(server_url, dbname=db), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")
        admin.execute("CREATE EXTENSION pg_trgm")
    urls = {"owner": make_conninfo(server_url, dbname=db, user=owner)}
    urls["runtime"] = make_conninfo(server_url, dbname=db, user=runtime)
    urls["nobody"] = make_conninfo(server_url, dbname=db, user=nobody)
    urls["runtime_role"] = runtime
    yield urls
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        for role in (owner, runtime, nobody):
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def test_migrate_as_owner_then_everything_as_a_dml_only_role(
    shared, embedder, tmp_path, monkeypatch, first_stage_service
):
    runner = CliRunner()
    params = str(REPO / "params.yaml")
    # before the owner migrated: the runtime role cannot create the schema, and says so in one line
    with pytest.raises(DatabaseError, match=r"run `pai migrate` as the database owner"):
        connect(shared["runtime"])
    monkeypatch.setenv("DATABASE_URL", shared["runtime"])
    line = one_line_error(runner.invoke(cli, ["ingest", str(tmp_path), "--params", params]))
    assert "pai migrate" in line and "permission denied" in line

    monkeypatch.setenv("DATABASE_URL", shared["owner"])
    r = runner.invoke(cli, ["migrate", "--grant", shared["runtime_role"], "--params", params])
    assert r.exit_code == 0 and "schema at version" in r.output and "may now read and write" in r.output, r.output
    again = runner.invoke(cli, ["migrate", "--params", params])
    assert again.exit_code == 0 and "nothing to apply" in again.output

    # the runtime: DML only (no CREATE on the schema, owns nothing)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text("# Bees\n\nHoney bees store nectar as honey in wax combs.")
    (notes / "rivers.md").write_text("# Rivers\n\nA delta forms where sediment settles at the sea.")
    with connect(shared["runtime"]) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE x (i int)")
        # a first load of two batches into an empty store: this role may not drop the HNSW index to build it
        # after (`retrieval.corpus.bulk`), so it loads the usual way, the index kept
        report = ingest_paths(conn, [notes], IngestParams(batch_docs=1), SearchParams(), embedder)
        assert report.chunks_inserted == 2 and not report.errors and not report.index_deferred
        assert conn.execute("SELECT to_regclass('chunks_embedding_hnsw') IS NOT NULL").fetchone() == (True,)
        (notes / "bees.md").write_text("# Bees\n\nHoney bees store nectar as honey in hexagonal wax combs.")
        assert ingest_paths(conn, [notes], IngestParams(), SearchParams(), embedder).documents_updated == 1
        assert search(conn, embedder, "where is honey kept", SearchParams()).candidates[0].source.endswith("bees.md")
        m = maintain.run(conn, MaintainParams(feedback=str(tmp_path / "fb")), SearchParams(), tmp_path / "st")
        assert m.skipped is None
    svc = first_stage_service(url=shared["runtime"])
    with BackgroundServer(svc) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        q = client.post("/query", json={"query": "where do bees keep honey"})
        assert q.status_code == 200, q.text
        fb = client.post("/feedback", json={"query_id": q.json()["query_id"], "answer": "wax combs [1]", "rating": 1})
        assert fb.status_code == 200 and fb.json()["used_ranks"] == [1]
        assert client.post("/ingest", json={"source": "n", "text": "# Note\n\nA note."}).status_code == 200
        assert client.get("/health").status_code == 200
    with connect(shared["runtime"]) as conn:  # the feedback really landed, through DML alone
        (rated,) = conn.execute("SELECT count(*) FROM queries WHERE rating = 1").fetchone()
        assert rated == 1

    # a role with no rights at all: one line naming the right and the fix
    monkeypatch.setenv("DATABASE_URL", shared["nobody"])
    line = one_line_error(runner.invoke(cli, ["ingest", str(notes), "--params", params]))
    assert "permission denied" in line and "pai migrate --grant" in line
    # a params change the runtime cannot apply (the HNSW index's build options) is one line too
    with connect(shared["runtime"]) as conn:
        from retrieval.corpus import vector_index

        with pytest.raises(DatabaseError, match=r"may not rebuild it.*pai migrate"):
            vector_index.ensure_hnsw(conn, 24, 64)


def test_an_owner_who_may_not_create_extensions_is_told_who_must(server_url, monkeypatch):
    tag = uuid.uuid4().hex[:8]
    owner, db = f"own_{tag}", f"noext_{tag}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {owner} LOGIN")
        admin.execute(f"CREATE DATABASE {db} OWNER {owner}")
    try:
        monkeypatch.setenv("DATABASE_URL", make_conninfo(server_url, dbname=db, user=owner))
        line = one_line_error(CliRunner().invoke(cli, ["migrate", "--params", str(REPO / "params.yaml")]))
        assert 'extension "vector"' in line and "CREATE EXTENSION vector" in line
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {owner}")
