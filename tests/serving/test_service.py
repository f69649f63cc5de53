"""One query through the service (serving/service.py `run_query`): retrieve -> pick -> log -> the response body,
on a real Postgres with the real MiniLM, called directly (no HTTP)."""

from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from serving.service import run_query

NOTES = {
    "bees.md": "# Bees\n\nHoney bees collect nectar from flowers and store it as honey in wax combs.",
    "rivers.md": "# Rivers\n\nRivers carry fresh water from mountains down to the sea, shaping valleys.",
    "compilers.md": "# Compilers\n\nA compiler parses source code into a syntax tree and emits machine code.",
}


def test_a_query_is_retrieved_picked_logged_and_answered(db_url, embedder, tmp_path, similarity_service):
    for name, text in NOTES.items():
        (tmp_path / name).write_text(text)
    with connect(db_url) as conn:
        ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)
    service = similarity_service()
    assert service.ready()  # a pinned selector serves at once
    # the pool the app's lifespan opens (tests/serving/test_app.py runs the same over HTTP)
    service.pool = ConnectionPool(
        db_url, min_size=1, max_size=4, open=True, kwargs={"autocommit": True}, configure=register_vector
    )
    try:
        body = run_query(service, "how do bees make honey?", inline=True)
    finally:
        service.pool.close()
        service.keyword_workers.shutdown()
        service.picker.close()
    assert (body["query_id"], body["selector_version"], body["selection_status"]) == (1, "similarity", "ok")
    assert body["context"][0]["source"].endswith("bees.md") and body["context"][0]["text"].startswith("# Bees")
    assert [c["rank"] for c in body["candidates"]] == [1, 2, 3] and body["exploration"] is None
    assert (tmp_path / "staging").exists() and body["staging_file"].endswith(".md")
    with connect(db_url) as conn:
        logged = conn.execute(
            "SELECT text, selector_version FROM queries WHERE id = %s", (body["query_id"],)
        ).fetchone()
        (n_candidates,) = conn.execute(
            "SELECT count(*) FROM query_candidates WHERE query_id = %s", (body["query_id"],)
        ).fetchone()
    assert logged == ("how do bees make honey?", "similarity") and n_candidates == 3
