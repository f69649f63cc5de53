"""Latency of the cross-encoder selector: `CrossEncoderSelector.answer` on 20 real candidates.

Candidate sets come from the shared benchmark: a HotpotQA test question with its 10 paragraphs plus
the next question's 10 (titles as headings), and a SciFact claim with 20 corpus abstracts (longer:
most reach the model's max length). The model loads and warms up once, outside the timing.

    python -m eval.bench_ce --model models/cross_encoder [--model OTHER ...] [--dtypes float32,auto]

Every model is timed in every precision, one after another in the same process, so the rows compare.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from retrieval.selection import PromptCandidate
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


def bench(model_dir: Path, queries_with_20_candidates: list[tuple[str, list[PromptCandidate]]], repeats: int = 3,
          k: int = 5, threads: int | None = None, dtype: str | None = None) -> dict:  # fmt: skip
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
    return {"calls": len(ms), "candidates": round(float(np.mean([len(c) for _, c in queries_with_20_candidates])), 1),
            "layers": layers, "max_length": selector.max_length, "dtype": selector.dtype, "torch_threads": torch.get_num_threads(),
            "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, action="append", help="a train_ce output folder; repeat to compare (default models/cross_encoder)")
    ap.add_argument("--dtypes", default="float32,auto", help="comma-separated precisions to time each model in (float32, bfloat16, auto)")
    ap.add_argument("--benchmark", type=Path, default=Path("../shared/benchmark"), help="the shared benchmark folder")
    ap.add_argument("--queries", type=int, default=30, help="candidate sets per dataset")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, one per core)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    a = ap.parse_args()
    sets = {"hotpotqa": hotpotqa_sets(a.benchmark / "hotpotqa" / "test.jsonl", a.queries), "scifact": scifact_sets(a.benchmark / "scifact", a.queries)}
    rows = []
    for model in a.model or [Path("models/cross_encoder")]:
        for dtype in dict.fromkeys(a.dtypes.split(",")):
            for name, s in sets.items():
                rows.append({"model": str(model), "dataset": name, **bench(model, s, a.repeats, threads=a.threads, dtype=dtype)})
    t = Table(title="cross-encoder selector: one answer over 20 candidates (ms)")
    for col in ("model", "dataset", "layers", "max_length", "dtype", "threads", "calls", "p50_ms", "p95_ms"):
        t.add_column(col, justify="left" if col in ("model", "dataset", "dtype") else "right")
    for r in rows:
        t.add_row(r["model"], r["dataset"], str(r["layers"]), str(r["max_length"]), r["dtype"], str(r["torch_threads"]), str(r["calls"]),
                  f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}")  # fmt: skip
    Console().print(t)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
