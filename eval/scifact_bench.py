"""Stage `benchmark`: SciFact test as a contract-5 benchmark whose candidates come from *our own*
retrieval (hybrid search over the ingested corpus, the candidates above threshold, as the selector
sees them), so evaluation measures selection on the candidates the service really produces.

A candidate chunk is relevant when its abstract is in the qrels. Queries with no relevant abstract
among their candidates are left out and counted (recall would be undefined). When the SciFact corpus
is not in the database, the stage writes an empty benchmark and says so; evaluate skips it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from retrieval.db import connect
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.params import BENCHMARK_DIR, EmbedParams, SearchParams, load_section
from retrieval.query.search import search_vector

from .retrieval_eval import load_scifact


@dataclass(frozen=True)
class BenchmarkParams:
    """The benchmark stage: the judged SciFact split as contract-5 items over this store's candidates."""

    benchmark_dir: str = str(BENCHMARK_DIR)
    """SciFact claims + qrels: the judged sets the repository ships (data/judged/README.md)"""
    split: str = "test"
    """the SciFact split the benchmark stage writes (`test`)"""
    out: str = "data/benchmarks"
    """scifact-<split>.jsonl: contract-5 items, candidates from our own hybrid search; stats.json"""

    @property
    def file(self) -> Path:
        """The contract-5 file the stage writes: `out`/scifact-`split`.jsonl."""
        return Path(self.out) / f"scifact-{self.split}.jsonl"

    def problems(self) -> list[str]:
        return (
            []
            if self.split in ("train", "test", "dev")
            else [f"benchmark.split must be train, test or dev, not {self.split!r}"]
        )


def items_from_search(queries: list[tuple[str, str, set[str]]], search) -> tuple[list[dict], dict]:
    """Contract-5 items from (qid, claim, relevant corpus ids) and a `search(claim) -> candidates`."""
    items, skipped = [], 0
    for qid, text, relevant in queries:
        cands = search(text)
        rel = [str(c.chunk_id) for c in cands if c.source.rsplit("#", 1)[-1] in relevant]
        if not rel:
            skipped += 1
            continue
        items.append(
            {
                "qid": qid,
                "query": text,
                "relevant_ids": rel,
                "answers": [],
                "candidates": [
                    {"id": str(c.chunk_id), "title": c.heading, "text": c.text, "source": c.source} for c in cands
                ],
            }
        )
    n = [len(it["candidates"]) for it in items]
    return items, {
        "queries": len(queries),
        "items": len(items),
        "no_relevant_candidate": skipped,
        "candidates_mean": round(sum(n) / len(n), 2) if n else 0,
    }


def main() -> None:
    console = Console(stderr=True)
    p = load_section("params.yaml", "benchmark", BenchmarkParams)
    sp = load_section("params.yaml", "search", SearchParams)
    out = Path(p.out) / f"scifact-{p.split}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    queries = load_scifact(Path(p.benchmark_dir), p.split)
    embedder = get_embedder(load_section("params.yaml", "embed", EmbedParams))
    with connect() as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM documents WHERE source LIKE %s", ("%scifact/corpus.jsonl#%",)
        ).fetchone()
        if n == 0:
            items, stats = (
                [],
                {
                    "queries": len(queries),
                    "items": 0,
                    "skipped": "SciFact corpus not in the database (pai lab cycle ingests it)",
                },
            )
            console.print(f"[yellow]benchmark: {stats['skipped']}; writing an empty {out}[/yellow]")
        else:
            vecs = dict(zip((q for _, q, _ in queries), embedder.encode([q for _, q, _ in queries])))
            items, stats = items_from_search(queries, lambda q: search_vector(conn, q, vecs[q], sp).above)
    write_atomic(out, "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))
    write_atomic(out.parent / "stats.json", json.dumps(stats, indent=2) + "\n")
    console.print(
        f"benchmark: {out}: {stats['items']} of {stats['queries']} SciFact {p.split} claims have a relevant abstract "
        f"among their candidates",
        soft_wrap=True,
    )


if __name__ == "__main__":
    main()
