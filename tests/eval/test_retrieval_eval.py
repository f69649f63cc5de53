"""First-stage retrieval quality (eval/retrieval_eval.py): SciFact's queries with their qrels, corpus ids in rank
order one per document, and vector-only beside hybrid on a small corpus ingested into a real Postgres."""

import json

from eval.retrieval_eval import doc_ids, evaluate, load_scifact
from retrieval.corpus.ingest import ingest_paths
from retrieval.params import IngestParams, SearchParams

CORPUS = {
    "1": "Honey bees collect nectar from flowers and store it as honey in wax combs.",
    "2": "Rivers carry fresh water from mountains down to the sea, shaping valleys.",
    "3": "A compiler parses source code into a syntax tree and emits machine code.",
    "4": "PostgreSQL stores rows in heap pages; B-tree indexes speed up lookups.",
}


def test_scifact_test_queries_come_with_their_relevant_abstracts(benchmark_dir):
    queries = load_scifact(benchmark_dir, "test")
    assert len(queries) == 300 and len({q for q, _, _ in queries}) == 300
    assert all(text.strip() and relevant for _, text, relevant in queries)


def test_doc_ids_are_one_per_document_in_rank_order():
    assert doc_ids(["/c.jsonl#7", "/c.jsonl#7", "/c.jsonl#3", "/d.jsonl#7"]) == ["7", "3"]
    assert doc_ids([]) == []


def test_vector_and_hybrid_side_by_side(conn, embedder, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in CORPUS.items()))
    ingest_paths(conn, [corpus], IngestParams(), SearchParams(), embedder)
    queries = [("q1", "how do bees make honey?", {"1"}), ("q2", "what does a compiler emit?", {"3"})]
    ticks = []
    rows = evaluate(conn, embedder, queries, SearchParams(), advance=lambda: ticks.append(1))
    assert [r["system"] for r in rows] == ["vector (HNSW)", f"hybrid (vector + {SearchParams().keyword}, RRF)"]
    for r in rows:
        assert r["queries"] == 2 and r["recall@5"] == r["mrr"] == 1.0 and r["sql_p50_ms"] > 0
    assert len(ticks) == 4  # one per query and system
