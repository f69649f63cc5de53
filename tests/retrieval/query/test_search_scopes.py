"""Search within scopes: both sides filter, a small scope among a large one still gets its top-k, dedup and
sources stay within a scope, and migration 015 gives the rows stored before it the default scope."""

import uuid

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.db import _migration_files, connect
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import search, search_vector

PARAMS = SearchParams(threshold=0.0, hybrid=True, keyword="both")


def note(source: str, text: str) -> Document:
    return Document(source, "webhook:", text, "markdown")


def test_each_scope_reads_only_its_own_chunks_on_both_sides(conn, embedder):
    ingest_documents(
        conn, [note("a", "# Kiwi\nThe kiwi orchard is watered on Tuesdays.")], IngestParams(), PARAMS, embedder, "alice"
    )
    ingest_documents(
        conn, [note("b", "# Kiwi\nBob's kiwi budget is forty euros.")], IngestParams(), PARAMS, embedder, "bob"
    )
    sources = lambda scopes: {
        (c.source, c.text) for c in search(conn, embedder, "kiwi", PARAMS, scopes=scopes).candidates
    }  # noqa: E731
    alice, bob = sources(["alice"]), sources(["bob"])
    assert alice and all("orchard" in t for _, t in alice)
    assert bob and all("budget" in t for _, t in bob)
    assert len(sources(["alice", "bob"])) == 2 and len(sources(None)) == 2
    assert sources(["carol"]) == set()


def test_the_same_source_and_text_are_two_documents_in_two_scopes(conn, embedder):
    text = "# Plan\nShip the release on Friday after the freeze."
    for scope in ("alice", "bob"):
        r = ingest_documents(conn, [note("plan", text)], IngestParams(), PARAMS, embedder, scope)
        assert r.chunks_inserted == 1 and r.duplicates_skipped == 0  # dedup only within a scope
    assert conn.execute("SELECT scope FROM documents ORDER BY scope").fetchall() == [("alice",), ("bob",)]
    assert conn.execute("SELECT scope FROM chunk_terms ORDER BY scope").fetchall() == [("alice",), ("bob",)]
    again = ingest_documents(conn, [note("other", text)], IngestParams(), PARAMS, embedder, "alice")
    assert again.duplicates_skipped == 1  # within one scope, an exact duplicate still is one


def _insert(conn, scope: str, vectors: np.ndarray) -> None:
    (doc,) = conn.execute(
        "INSERT INTO documents (source, path, content_hash, n_chunks, scope) VALUES (%s, 'x', 'h', %s, %s) RETURNING id",
        (f"bulk-{scope}", len(vectors), scope),
    ).fetchone()
    with conn.cursor().copy(
        "COPY chunks (document_id, source, ord, start_line, end_line, text, content_hash, tokens, embedding, scope)"
        " FROM STDIN"
    ) as cp:
        for i, v in enumerate(vectors):
            cp.write_row(
                (doc, f"bulk-{scope}", i, 1, 1, f"t{i}", f"h{scope}{i}", 1, "[" + ",".join(map(str, v)) + "]", scope)
            )


def test_a_small_scope_among_a_large_one_still_gets_its_top_k(conn):
    rng = np.random.default_rng(0)
    query = rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)
    near = query + 0.05 * rng.normal(size=(3000, 384)).astype(np.float32)  # the large scope crowds the query
    far = rng.normal(size=(40, 384)).astype(np.float32)
    _insert(conn, "big", near / np.linalg.norm(near, axis=1, keepdims=True))
    _insert(conn, "small", far / np.linalg.norm(far, axis=1, keepdims=True))
    # as on a large store, the planner walks the HNSW index (here it would take the scope's b-tree and sort exactly)
    conn.execute("DROP INDEX chunks_scope")
    conn.execute("SET enable_seqscan = off")
    p = SearchParams(threshold=-1.0, hybrid=False, top_k=20, ef_search=40)
    small = search_vector(conn, "q", query, p, scopes=["small"]).candidates
    assert len(small) == 20 and {c.source for c in small} == {"bulk-small"}
    exact = conn.execute(
        "SELECT id FROM chunks WHERE scope = 'small' ORDER BY embedding::vector <=> %s LIMIT 20", (query,)
    ).fetchall()
    assert len({c.chunk_id for c in small} & {i for (i,) in exact}) >= 18  # approximate, as HNSW is


def test_migration_015_gives_the_rows_stored_before_it_the_default_scope(pg_server_url):
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(pg_server_url, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                      " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
            for version, file, sql in _migration_files():
                if version < 15:
                    c.execute(sql)
                    c.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (version, file))
            (doc,) = c.execute(
                "INSERT INTO documents (source, path, content_hash, n_chunks) VALUES ('old', 'p', 'h', 1) RETURNING id"
            ).fetchone()
            c.execute(
                "INSERT INTO chunks (document_id, source, ord, start_line, end_line, text, content_hash, tokens,"
                " embedding) VALUES (%s, 'old', 0, 1, 1, 'an old note', 'c', 3, %s::halfvec)",
                (doc, "[" + ",".join(["0.05"] * 384) + "]"),
            )
            c.execute("INSERT INTO queries (text, selector_version) VALUES ('old question', 'first-stage')")
            c.execute("INSERT INTO captures (user_text, assistant_text) VALUES ('u', 'a')")
        with connect(url) as c:  # applies 015
            for table in ("documents", "chunks", "chunk_terms", "queries", "captures"):
                assert c.execute(f"SELECT array_agg(DISTINCT scope) FROM {table}").fetchone()[0] == ["default"], table
            (nullable,) = c.execute(
                "SELECT bool_or(is_nullable = 'YES') FROM information_schema.columns WHERE column_name = 'scope'"
            ).fetchone()
            assert nullable is False
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
