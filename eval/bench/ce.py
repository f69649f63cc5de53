"""Latency of the cross-encoder selector: `CrossEncoderSelector.answer` on 20 real candidates.

Candidate sets come from the shared benchmark: a HotpotQA test question with its 10 paragraphs plus
the next question's 10 (titles as headings), and a SciFact claim with 20 corpus abstracts (longer:
most reach the model's max length). The model loads and warms up once, outside the timing.

    pai bench ce --model models/cross_encoder [--model OTHER ...] [--dtypes float32,auto]

Every model is timed in every precision, one after another in the same process, so the rows compare.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from rich.table import Table

from retrieval.contracts.selection import PromptCandidate
from serving.cross_encoder import CrossEncoderSelector


def hotpotqa_sets(path: Path, n: int) -> list[tuple[str, list[PromptCandidate]]]:
    """(question, 20 paragraphs): each question's own 10 and the next question's 10."""
    items = []
    for line in open(path, encoding="utf-8"):
        items.append(json.loads(line))
        if len(items) > n:
            break
    items = [it for it in items if len(it["candidates"]) == 10]
    cands = lambda it: [PromptCandidate(f"hotpotqa/{c['id']}", c.get("title"), c["text"]) for c in it["candidates"]]  # noqa: E731
    return [(a["query"], cands(a) + cands(b)) for a, b in zip(items, items[1:])][:n]


def scifact_sets(folder: Path, n: int) -> list[tuple[str, list[PromptCandidate]]]:
    """(claim, 20 abstracts): the claims in file order, each with the next 20 abstracts of the corpus."""
    claims, docs = [], []
    for line in open(folder / "queries.jsonl", encoding="utf-8"):
        claims.append(json.loads(line)["text"])
        if len(claims) >= n:
            break
    for line in open(folder / "corpus.jsonl", encoding="utf-8"):
        d = json.loads(line)
        docs.append(PromptCandidate(f"scifact/{d['_id']}", d["title"] or None, d["text"]))
        if len(docs) >= 20 * len(claims):
            break
    return [(c, docs[20 * i : 20 * i + 20]) for i, c in enumerate(claims)]


def bench(
    model_dir: Path,
    queries_with_20_candidates: list[tuple[str, list[PromptCandidate]]],
    repeats: int = 3,
    k: int = 5,
    threads: int | None = None,
    dtype: str | None = None,
) -> dict:
    """p50/p95 milliseconds of one `answer` call over every query, `repeats` times each."""
    selector = CrossEncoderSelector(Path(model_dir), version="bench", threads=threads, dtype=dtype)
    selector.answer(*queries_with_20_candidates[0], k)  # warm-up: first-call allocations, lazy inits
    ms = []
    for _ in range(repeats):
        for query, cands in queries_with_20_candidates:
            t0 = time.perf_counter()
            selector.answer(query, cands, k)
            ms.append((time.perf_counter() - t0) * 1000)
    import torch

    layers = selector.model.config.num_hidden_layers
    return {
        "calls": len(ms),
        "candidates": round(float(np.mean([len(c) for _, c in queries_with_20_candidates])), 1),
        "layers": layers,
        "max_length": selector.max_length,
        "dtype": selector.dtype,
        "torch_threads": torch.get_num_threads(),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
    }


def run(
    models: list[Path],
    dtypes: list[str],
    benchmark_dir: Path,
    max_queries: int,
    repeats: int = 3,
    threads: int | None = None,
) -> list[dict]:
    """Every model timed in every precision on both datasets' candidate sets, one row each."""
    sets = {
        "hotpotqa": hotpotqa_sets(benchmark_dir / "hotpotqa" / "test.jsonl", max_queries),
        "scifact": scifact_sets(benchmark_dir / "scifact", max_queries),
    }
    rows = []
    for model in models:
        for dtype in dict.fromkeys(dtypes):
            for name, s in sets.items():
                rows.append(
                    {"model": str(model), "dataset": name, **bench(model, s, repeats, threads=threads, dtype=dtype)}
                )
    return rows


def table(rows: list[dict]) -> Table:
    t = Table(title="cross-encoder selector: one answer over 20 candidates (ms)")
    for col in ("model", "dataset", "layers", "max_length", "dtype", "threads", "calls", "p50_ms", "p95_ms"):
        t.add_column(col, justify="left" if col in ("model", "dataset", "dtype") else "right")
    for r in rows:
        t.add_row(
            r["model"],
            r["dataset"],
            str(r["layers"]),
            str(r["max_length"]),
            r["dtype"],
            str(r["torch_threads"]),
            str(r["calls"]),
            f"{r['p50_ms']:.1f}",
            f"{r['p95_ms']:.1f}",
        )
    return t
