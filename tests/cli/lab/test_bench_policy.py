"""`pai lab bench policy`'s queries from the store: its heading paths as short questions (nested ones as `parent
heading`), and how many chunks sit under a nested heading, on a real Postgres."""

from cli.lab.bench_policy import heading_queries, nested_share
from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.params import IngestParams, SearchParams

NESTED = """# Deployment

Intro to deploying the service.

## Rollback

To roll back a bad release, move the champion alias to the previous version; the service follows it.

## Canary

Every new selector answers three known prompts before it serves.
"""


def test_heading_paths_become_queries_and_nested_chunks_are_counted(conn, embedder):
    ingest_documents(
        conn, [Document("notes/deploy.md", "notes", NESTED, "markdown")], IngestParams(), SearchParams(), embedder
    )
    assert sorted(heading_queries(conn, 10)) == ["Deployment Canary", "Deployment Rollback"]  # one word: no query
    assert heading_queries(conn, 1) == heading_queries(conn, 1, seed=0) and len(heading_queries(conn, 1)) == 1
    assert nested_share(conn) == (3, 2)
