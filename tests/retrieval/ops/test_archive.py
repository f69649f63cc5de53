"""`pai export` / `pai import`'s core on real PostgreSQL with the real embedder: a store of two scopes, its feedback
log and a registry file round-trip exactly (every table's rows byte for byte, 100 searches the same ids and scores),
and an export taken while another connection writes is one moment of the store."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect, grant_runtime, store_id
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.ops.archive import NOT_CARRIED, export_store, import_store, tables
from retrieval.ops.archive_format import ArchiveError, read_manifest, unpack
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import search

WORDS = [
    "river",
    "honey",
    "compiler",
    "gasket",
    "postgres",
    "valley",
    "nectar",
    "syntax",
    "index",
    "heap",
    "flower",
    "mountain",
    "token",
    "parser",
    "sea",
]


@pytest.fixture
def other_url(pg_server_url, template_db):
    """A second fresh, migrated database: the import's target."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name} TEMPLATE {template_db}")
    url = make_conninfo(pg_server_url, dbname=name)
    with psycopg.connect(url, autocommit=True) as c:  # a clone of the template would share its identity
        c.execute("UPDATE store_identity SET id = gen_random_uuid()")
    yield url
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def fill(conn, embedder, folder: Path) -> list[str]:
    """Documents in two scopes, queries logged with citations: the queries asked."""
    for scope in ("alice/notes", "bob/work"):
        d = folder / scope.replace("/", "_")
        d.mkdir()
        for i in range(12):
            words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(6))
            (d / f"n{i}.md").write_text(
                f"# Note {i} of {scope}\n\nAbout {words}.\n\n## More\n\nThe {WORDS[i]} again in {scope}, tab\there.\n"
            )
        ingest_paths(conn, [d], IngestParams(), SearchParams(), embedder, scope=scope)
    queries = [f"{a} and {b}" for a in WORDS for b in WORDS[:7]][:100]
    for q in queries[:10]:
        r = search(conn, embedder, q, SearchParams())
        qid = log_query(conn, q, r.candidates, "first-stage", shown=[c.rank for c in r.context], scope="alice/notes")
        record_feedback(conn, qid, answer="It says so [1], see [2].", rating=1)
    return queries


def dump(conn) -> dict[str, list[tuple]]:
    return {
        t.name: conn.execute(f"SELECT {', '.join(t.columns)} FROM {t.name} ORDER BY 1, 2").fetchall()
        for t in tables(conn)
    }


def test_round_trip_is_identical_rows_and_searches(conn, other_url, embedder, tmp_path):
    queries = fill(conn, embedder, tmp_path)
    blob = tmp_path / "selectors" / "abc" / "weights.json"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b'{"w": [1, 2, 3]}\x00\xff')
    archive = tmp_path / "memory.pai.tgz"
    manifest = export_store(conn, archive, "test", files=[("selectors/abc/weights.json", blob)])
    assert manifest["tables"]["documents"]["rows"] == 24 and manifest["tables"]["queries"]["rows"] == 10
    assert not set(NOT_CARRIED) & set(manifest["tables"])
    assert read_manifest(archive) == manifest
    work = tmp_path / "work"
    work.mkdir()
    with connect(other_url) as target:
        import_store(target, archive, work)
        assert (work / "files/selectors/abc/weights.json").read_bytes() == blob.read_bytes()
        assert dump(target) == dump(conn)
        # the full-text rows were rebuilt, scopes with them
        same = "SELECT chunk_id, scope, tsv::text FROM chunk_terms ORDER BY 1"
        assert target.execute(same).fetchall() == conn.execute(same).fetchall()
        # byte for byte: the target exports the same tables
        again = export_store(target, tmp_path / "again.tgz", "test")
        assert {t: s["sha256"] for t, s in again["tables"].items()} == {
            t: s["sha256"] for t, s in manifest["tables"].items()
        }
        for q in queries:
            for scopes in (None, ["bob/work"]):
                a = search(conn, embedder, q, SearchParams(), scopes=scopes).candidates
                b = search(target, embedder, q, SearchParams(), scopes=scopes).candidates
                assert [(c.chunk_id, c.score) for c in a] == [(c.chunk_id, c.score) for c in b], q
        # ids go on past the loaded ones; the origin is recorded, the target keeps its own identity
        (nxt,) = target.execute("SELECT nextval('documents_id_seq')").fetchone()
        assert nxt == conn.execute("SELECT max(id) + 1 FROM documents").fetchone()[0]
        assert target.execute("SELECT origin_store_id::text FROM store_imports").fetchall() == [(store_id(conn),)]
        assert store_id(target) != store_id(conn)
        # a second import into the now full store is refused, nothing added
        with pytest.raises(ArchiveError, match="not empty"):
            import_store(target, archive, tmp_path)
        assert target.execute("SELECT count(*) FROM store_imports").fetchone() == (1,)


def test_export_during_writes_is_one_moment(conn, db_url, embedder, tmp_path):
    fill(conn, embedder, tmp_path)
    stop, done = threading.Event(), []

    def writer():  # each transaction: a document and its two chunks, and a query and its candidate
        vec = "[" + ",".join(["0.05"] * 384) + "]"
        with connect(db_url) as w:
            i = 0
            while not stop.is_set():
                with w.transaction():
                    (d,) = w.execute(
                        "INSERT INTO documents (source, path, content_hash, n_chunks) VALUES (%s, 'w', 'h', 2) RETURNING id",
                        (f"w{i}",),
                    ).fetchone()
                    for o in (0, 1):
                        w.execute(
                            "INSERT INTO chunks (document_id, source, ord, start_line, end_line, text, content_hash,"
                            " tokens, embedding) VALUES (%s, %s, %s, 1, 1, 'x', %s, 1, %s)",
                            (d, f"w{i}", o, f"h{o}", vec),
                        )
                i += 1
                done.append(i)

    t = threading.Thread(target=writer)
    t.start()
    try:
        while len(done) < 3:
            stop.wait(0.01)
        manifests = [export_store(conn, tmp_path / f"a{n}.tgz", "test") for n in range(3)]
    finally:
        stop.set()
        t.join()
    assert len(done) > 5
    for n, m in enumerate(manifests):
        work = tmp_path / f"w{n}"
        work.mkdir()
        unpack(tmp_path / f"a{n}.tgz", work)
        docs = [r.split(b"\t") for r in (work / "tables/documents.tsv").read_bytes().splitlines()]
        chunks = [r.split(b"\t") for r in (work / "tables/chunks.tsv").read_bytes().splitlines()]
        n_chunks, document_id = (
            m["tables"]["documents"]["columns"].index("n_chunks"),
            m["tables"]["chunks"]["columns"].index("document_id"),
        )
        assert len(docs) > 24  # some of the writer's documents are in it
        # every document has all its chunks and every chunk its document: no transaction torn
        assert {c[document_id] for c in chunks} == {d[0] for d in docs}
        assert sum(int(d[n_chunks]) for d in docs) == len(chunks) == m["tables"]["chunks"]["rows"]
    # the three exports are three moments, in order
    rows = [m["tables"]["documents"]["rows"] for m in manifests]
    assert rows == sorted(rows)


def test_a_dml_only_role_imports_with_the_indexes_kept(conn, other_url, pg_server_url, tmp_path):
    """A shared PostgreSQL's runtime role may not drop the indexes: the rows are indexed as they load, and all loads."""
    conn.execute("INSERT INTO documents (source, path, content_hash, n_chunks) VALUES ('a.md', 'a.md', 'h', 1)")
    conn.execute(
        "INSERT INTO chunks (document_id, source, ord, start_line, end_line, text, content_hash, tokens, embedding)"
        " SELECT id, 'a.md', 0, 1, 1, 'bees', 'c', 1, %s FROM documents",
        ("[" + ",".join(["0.05"] * 384) + "]",),
    )
    export_store(conn, tmp_path / "a.tgz", "test")
    role = f"rt_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        with connect(other_url) as owner:
            grant_runtime(owner, role)
        with connect(make_conninfo(other_url, user=role)) as rt:
            import_store(rt, tmp_path / "a.tgz", tmp_path)
            assert rt.execute("SELECT count(*) FROM chunk_terms").fetchone() == (1,)
            assert rt.execute("SELECT to_regclass('chunks_embedding_hnsw') IS NOT NULL").fetchone() == (True,)
    finally:
        with psycopg.connect(other_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")
