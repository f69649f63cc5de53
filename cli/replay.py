"""`pai simulate`: replay a benchmark's queries through the real `/query` path and post the feedback
a consumer would give, so a fresh machine gets a realistic feedback log.

Used = the candidates whose document is relevant (qrels / HotpotQA gold paragraphs); the other
candidates are ignored. Rating = +1 when the served context held a relevant chunk, else -1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from eval.retrieval_eval import doc_ids, load_scifact
from retrieval.db import connect
from retrieval.ingest import ingest_documents
from retrieval.sources import Document, read_documents
from serving.server import BackgroundServer, build_service


@dataclass(frozen=True)
class ReplayQuery:
    qid: str
    query: str
    relevant: frozenset[str]  # relevant document ids (the part of a source after '#')
    answer: str | None = None


@dataclass
class ReplaySummary:
    queries: int = 0
    with_used: int = 0  # queries where a relevant document was among the candidates
    used: int = 0
    ignored: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {
            **self.__dict__,
            "errors": len(self.errors),
            "queries_per_s": round(self.queries / self.seconds, 1) if self.seconds else 0.0,
        }


def benchmark_files(benchmark_dir: Path, benchmark: str) -> list[Path]:
    if benchmark == "scifact":
        return [benchmark_dir / "scifact" / "corpus.jsonl"]
    if benchmark == "hotpotqa":  # all paragraphs of all splits pooled as one corpus
        return [benchmark_dir / "hotpotqa" / f"{s}.jsonl" for s in ("train", "dev", "test")]
    raise ValueError(f"unknown benchmark {benchmark!r} (scifact or hotpotqa)")


def load_queries(benchmark_dir: Path, benchmark: str, split: str) -> list[ReplayQuery]:
    if benchmark == "scifact":
        return [ReplayQuery(q, text, frozenset(rel)) for q, text, rel in load_scifact(benchmark_dir, split)]
    if benchmark == "hotpotqa":
        out = []
        for line in open(benchmark_dir / "hotpotqa" / f"{split}.jsonl", encoding="utf-8"):
            r = json.loads(line)
            answers = r.get("answers") or []
            answer = (
                answers[0] if isinstance(answers, list) and answers else answers if isinstance(answers, str) else None
            )
            out.append(ReplayQuery(r["qid"], r["query"], frozenset(r["relevant_ids"]), answer))
        return out
    raise ValueError(f"unknown benchmark {benchmark!r} (scifact or hotpotqa)")


def corpus_documents(
    files: list[Path], queries: list[ReplayQuery], limit: int | None, max_bytes: int
) -> list[Document]:
    """The corpus; with `limit`, the queries' relevant documents plus the first `limit` others."""
    docs = [d for f in files for d in read_documents(f, max_bytes) if isinstance(d, Document)]
    if limit is None:
        return docs
    relevant = set().union(*(q.relevant for q in queries)) if queries else set()
    return [d for d in docs if d.source.rsplit("#", 1)[-1] in relevant] + [
        d for d in docs if d.source.rsplit("#", 1)[-1] not in relevant
    ][:limit]


def feedback_for(response: dict, q: ReplayQuery) -> dict:
    """The feedback a consumer who knows the gold documents would post for one /query response."""
    used = [c["chunk_id"] for c in response["candidates"] if doc_ids([c["source"]])[0] in q.relevant]
    in_context = {c["chunk_id"] for c in response["context"]}
    body = {"query_id": response["query_id"], "used_chunk_ids": used, "rating": 1 if in_context & set(used) else -1}
    if q.answer and q.answer.strip():  # the service refuses a blank answer
        body["answer"] = q.answer
    return body


def replay(base_url: str, queries: list[ReplayQuery], advance: Callable[[], None] = lambda: None) -> ReplaySummary:
    s = ReplaySummary()
    t0 = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for q in queries:
            try:
                r = client.post("/query", json={"query": q.query})
                r.raise_for_status()
                fb = feedback_for(r.json(), q)
                client.post("/feedback", json=fb).raise_for_status()
            except httpx.HTTPError as e:
                s.errors.append(f"{q.qid}: {e}")
                advance()
                continue
            n_cands = len(r.json()["candidates"])
            s.queries += 1
            s.with_used += bool(fb["used_chunk_ids"])
            s.used += len(fb["used_chunk_ids"])
            s.ignored += n_cands - len(fb["used_chunk_ids"])
            s.thumbs_up += fb["rating"] == 1
            s.thumbs_down += fb["rating"] == -1
            advance()
    s.seconds = time.perf_counter() - t0
    return s


def run_replay(
    params: Path,
    benchmark_dir: Path,
    benchmark: str,
    split: str,
    bar,
    url: str | None = None,
    limit: int | None = None,
    corpus_limit: int | None = None,
) -> ReplaySummary:
    """Ingest the benchmark corpus, then replay `split` through a service (`url`, or one started here)."""
    queries = load_queries(benchmark_dir, benchmark, split)[:limit]
    service = build_service(params)
    docs = corpus_documents(
        benchmark_files(benchmark_dir, benchmark), queries, corpus_limit, service.ingest.max_file_bytes
    )
    task = bar.add_task(f"ingest {benchmark} corpus", total=len(docs))
    with connect(service.db_url) as conn:
        for start in range(0, len(docs), 512):
            ingest_documents(conn, docs[start : start + 512], service.ingest, service.search, service.embedder)
            bar.update(task, completed=min(start + 512, len(docs)))
    task = bar.add_task(f"replay {len(queries)} {benchmark} {split} queries", total=len(queries))
    if url:
        return replay(url, queries, lambda: bar.advance(task))
    with BackgroundServer(service) as srv:
        return replay(srv.url, queries, lambda: bar.advance(task))
