"""How long a forget takes on a store of a given size (`python -m eval.bench.forget`): a fresh database holding the
first N SciFact abstracts, Q logged queries (each with its staging file and a cited answer), an export of the log in
the pull's record shape (`query_id`, `query`, `answer`, `candidates` with their texts), one training line per query
(`meta.query_id` and its shown candidates' texts, as build's) and a DVC-style cache of both (eval never imports training,
so the files are written here in the same shapes); then one document that queries showed is forgotten: the
database's part (one transaction), the files' part, and a `--verify` scan of every place.

    python -m eval.bench.forget --docs 1000 --queries 200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from retrieval.contracts.selection import FIRST_STAGE
from retrieval.corpus.ingest import ingest_documents
from retrieval.db import connect, scratch_database
from retrieval.embed import get_embedder
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.ops import forget_files
from retrieval.ops.forget import Target, begin, finish
from retrieval.params import BENCHMARK_DIR, ForgetParams, IngestParams, SearchParams
from retrieval.query import staging
from retrieval.query.search import search

from .ingest import corpus_documents

SP = SearchParams(threshold=0.0)
_EXPORT = """
SELECT json_build_object('query_id', q.id, 'query', q.text, 'answer', q.answer, 'candidates', json_agg(json_build_object(
    'rank', c.rank, 'chunk_id', c.chunk_id, 'content_hash', c.content_hash, 'text', k.text, 'used', c.used)
    ORDER BY c.rank))
FROM queries q JOIN query_candidates c ON c.query_id = q.id LEFT JOIN chunks k ON k.id = c.chunk_id
GROUP BY q.id ORDER BY q.id
"""


def run(n_docs: int, n_queries: int, root: Path) -> dict:
    os.environ["PAI_HOME"] = str(root / "home")
    embedder = get_embedder()
    docs = corpus_documents(BENCHMARK_DIR / "scifact" / "corpus.jsonl", n_docs, 1 << 20)
    st, feedback, datasets, cache = root / "staging", root / "feedback", root / "datasets", root / "cache"
    with scratch_database("pai_bench_forget") as url, connect(url) as conn:
        ingest_documents(conn, docs, IngestParams(), SP, embedder)
        for d in docs[:n_queries]:
            sentences = d.text.split(". ")  # the second: the forgotten chunk's first words are not the query's own
            r = search(conn, embedder, sentences[min(1, len(sentences) - 1)][:200], SP)
            path = staging.write(staging.from_result(r, context=[1, 2, 3]), st)
            qid = log_query(conn, r.query, r.above, FIRST_STAGE, shown=[1, 2, 3], staging_path=str(path))
            record_feedback(conn, qid, answer=f"{r.above[0].text[:80]} [1]")
        records = [r for (r,) in conn.execute(_EXPORT)]
        feedback.mkdir()
        (feedback / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        train = [
            {"messages": [c["text"] for c in r["candidates"] if c["rank"] <= 3], "meta": {"query_id": r["query_id"]}}
            for r in records
        ]
        datasets.mkdir()
        (datasets / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in train))
        cache.mkdir()
        for i, f in enumerate([feedback / "feedback.jsonl", datasets / "train.jsonl"]):
            shutil.copyfile(f, cache / f"{i:02d}")
        fp = ForgetParams(pipeline=f"{feedback},{datasets}", dvc_cache=str(cache))
        places = forget_files.places(fp, st, home=root / "home")
        (doc, chunk_text) = conn.execute(
            "SELECT c.document_id, c.text FROM query_candidates q JOIN chunks c ON c.id = q.chunk_id"
            " WHERE q.shown ORDER BY q.query_id, q.rank LIMIT 1"
        ).fetchone()
        t0 = time.perf_counter()
        report = begin(conn, Target(doc_ids=(doc,)))
        t1 = time.perf_counter()
        done = finish(conn, report.journal_id, places, mark=None)
        t2 = time.perf_counter()
        traces = forget_files.verify(conn, chunk_text[:60], places)
        t3 = time.perf_counter()
        (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return {
        "documents": len(docs),
        "chunks": chunks,
        "queries": n_queries,
        "staging_files": sum(1 for _ in st.rglob("*.md")),
        "forgotten_chunks": report.chunks,
        "queries_touched": report.candidates_unlabelled,
        "files_changed": done.files,
        "database_s": round(t1 - t0, 3),
        "files_s": round(t2 - t1, 3),
        "verify_s": round(t3 - t2, 3),
        "traces_left": [f"{t.place}: {t.where}" for t in traces],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pai-forget-bench-") as tmp:
        print(json.dumps(run(a.docs, a.queries, Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
