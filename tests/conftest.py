"""Shared fixtures: a real PostgreSQL (DATABASE_URL, or an embedded pgserver one; Debian's packaged 15 where a
test asks), a fresh migrated database per test cloned from a template, and the real MiniLM embedder."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from eval import judged_sets
from retrieval.db import connect

REPO = Path(__file__).resolve().parents[1]
# Every test, and every `pai` a test starts (they inherit os.environ), runs on an explicit PAI_HOME: the checkout's
# own git-ignored `.pai` (its caches: the converted embedder, the scanner's rules, the tokenizer), never the user's
# memory in the platform's data folder (retrieval.db.default_home), and not a PAI_HOME exported in the shell.
# Tests that write state of their own (a database, staging files, a registry) set a tmp_path home over this one.
TEST_HOME = REPO / ".pai"
os.environ["PAI_HOME"] = str(TEST_HOME)
PG15 = Path("/usr/lib/postgresql/15")  # Debian's postgresql-15; pgvector is built into it by .ci/pg15


@pytest.fixture(scope="session")
def benchmark_dir() -> Path:
    """The judged benchmark sets the repository ships (data/judged/), unpacked where missing."""
    judged_sets.unpack()
    return judged_sets.JUDGED


# The team machines keep the judged sets' originals beside the checkout; data/judged/ ships copies of them, so only a
# test that checks the copies against the originals needs this folder (the `shared_benchmark` fixture).
SHARED_BENCHMARK = REPO.parent / "shared" / "benchmark"
SOURCES = {  # where to get each set (data/judged/README.md says how it was converted)
    "scifact": "SciFact in BEIR format (allenai/scifact, BEIR's scifact.zip)",
    "hotpotqa": "HotpotQA's dev set, distractor setting (hotpotqa.github.io)",
    "locomo": "LoCoMo (snap-research/locomo, data/locomo10.zip)",
}


@pytest.fixture(scope="session")
def shared_benchmark() -> Callable[[str], Path]:
    """`shared_benchmark("scifact/corpus.jsonl")`: that file of ../shared/benchmark; the test skips, saying where to get
    the data, where it is absent. A test reads data/judged/ (the `benchmark_dir` fixture) unless it checks the copies."""

    def need(name: str) -> Path:
        path = SHARED_BENCHMARK / name
        if not path.exists():
            where = SOURCES.get(name.split("/")[0], "data/judged/README.md names each set's source")
            pytest.skip(f"needs ../shared/benchmark/{name} (the team machines' copy, {SHARED_BENCHMARK}): {where}")
        return path

    return need


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory):
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(tmp_path_factory.mktemp("pg") / "data", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()


@pytest.fixture(scope="session")
def debian15_url():
    """A throwaway cluster of Debian's packaged PostgreSQL 15 (trust auth, a Unix socket only): a team's server
    is an older, packaged one, not the embedded 18 every other test uses."""
    if not (PG15 / "bin" / "postgres").exists():
        pytest.skip("Debian's PostgreSQL 15 is not installed (apt-get install postgresql-15, then bash .ci/pg15)")
    if not (PG15 / "lib" / "vector.so").exists():
        pytest.fail("pgvector is not installed for Debian's PostgreSQL 15: run `bash .ci/pg15` (as root)")
    # initdb and postgres refuse to run as root; pytest's basetemp is 0700, closed to `postgres`, hence /tmp
    as_server = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    tmp = Path(tempfile.mkdtemp(prefix="pai-pg15-"))
    if as_server:
        shutil.chown(tmp, "postgres")
    data = tmp / "data"
    try:
        subprocess.run(
            [*as_server, PG15 / "bin/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]
            + ["--locale=C", "--no-sync"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        opts = f"-c listen_addresses='' -k {tmp} -c fsync=off"  # no TCP port: the socket is in our own dir
        subprocess.run(
            [*as_server, PG15 / "bin/pg_ctl", "start", "-w", "-D", data, "-l", tmp / "log", "-o", opts],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        yield make_conninfo(host=str(tmp), port=5432, user="postgres", dbname="postgres")
    finally:
        subprocess.run([*as_server, PG15 / "bin/pg_ctl", "stop", "-D", data, "-m", "fast"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(pg_server_url):
    name = f"pai_template_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    connect(make_conninfo(pg_server_url, dbname=name)).close()  # applies the migrations once
    yield name
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def db_url(pg_server_url, template_db):
    """A fresh, migrated database for one test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name} TEMPLATE {template_db}")
    yield make_conninfo(pg_server_url, dbname=name)
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def conn(db_url):
    with connect(db_url) as c:
        yield c


@pytest.fixture(scope="session")
def embedder():
    from retrieval.embed import get_embedder

    return get_embedder()


@pytest.fixture
def first_stage_service(db_url, embedder, tmp_path):
    """The one way a test builds a Service: f(**kw) -> a Service on the test database (or `url=`, a runtime role's)
    with the first-stage order (or `picker=`), threshold 0 (or `search=`), default ingest (or `ingest=`), staging
    under tmp_path (or `staging=`); other keyword arguments go to Service (inline=, host=, swapper=, capture=...)."""
    from retrieval.params import IngestParams, SearchParams, StagingParams
    from serving.picker import Picker
    from serving.selectors import FirstStageSelector
    from serving.service import Service

    def make(picker=None, staging=None, url=None, search=None, ingest=None, **kw):
        return Service(
            url or db_url,
            embedder,
            picker or Picker(FirstStageSelector(), timeout_s=5),
            search or SearchParams(threshold=0.0),
            ingest or IngestParams(),
            StagingParams(dir=str(staging or tmp_path / "staging")),
            **kw,
        )

    return make


def _chunk_invariant_breaks(conn) -> list[tuple]:
    """(source, n_chunks, chunk rows, full-text rows) of every document where the three differ."""
    rows = conn.execute(
        """SELECT d.source, d.n_chunks,
                  (SELECT count(*) FROM chunks c WHERE c.document_id = d.id),
                  (SELECT count(*) FROM chunks c JOIN chunk_terms t ON t.chunk_id = c.id WHERE c.document_id = d.id)
           FROM documents d"""
    ).fetchall()
    return [r for r in rows if not r[1] == r[2] == r[3]]


def _all_text(conn) -> str:
    """Every row of every table of ours as text: what a leak check searches."""
    tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    return "\n".join(row[0] for t in tables for row in conn.execute(f"SELECT t::text FROM {t} t"))


@pytest.fixture
def invariant_breaks():
    """f(conn) -> documents whose n_chunks, chunk rows and full-text rows differ (should be [])."""
    return _chunk_invariant_breaks


@pytest.fixture
def all_text():
    """f(conn) -> every stored row as text, for leak checks."""
    return _all_text
