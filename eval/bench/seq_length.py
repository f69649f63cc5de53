"""Can ingest embed less? Passages embedded at fewer word pieces (`pai lab bench seq-length`).

Ingest's time is MiniLM's forward pass over every chunk, up to `max_seq_length` (256) word pieces. One
run, side by side on a contract-5 file: each length's embedding speed over the file's distinct passages
and the cosine order's Recall@5 over each query's candidates, with the paired 95 % CI against the first
length (the one stored).

    pai lab bench seq-length --benchmark data/benchmarks/scifact-test.jsonl --lengths 256,128
"""

from __future__ import annotations

import time

import numpy as np

from eval.systems import passage_texts
from retrieval.contracts.metrics import paired_bootstrap, recall_at_k
from retrieval.contracts.passage import passage_text
from retrieval.embed import Embedder


def run(items: list[dict], embedder: Embedder, lengths: list[int], k: int = 5, progress=None) -> dict:
    """`lengths[0]` is the reference; the embedder's own max_seq_length is restored after."""
    if not lengths or len(set(lengths)) != len(lengths):
        raise ValueError("lengths: at least one, each once")
    texts = passage_texts(items)
    stored = embedder.max_seq_length
    vecs, speed = {}, {}
    try:
        for length in lengths:
            embedder.max_seq_length = length
            t0 = time.perf_counter()
            vecs[length] = dict(zip(texts, embedder.encode(texts)))
            speed[length] = len(texts) / max(time.perf_counter() - t0, 1e-9)
            if progress:
                progress()
    finally:
        embedder.max_seq_length = stored
    recalls: dict[int, list[float]] = {length: [] for length in lengths}
    for it in items:
        q = embedder.encode([it["query"]])[0]
        passages = [passage_text(c.get("title"), c["text"]) for c in it["candidates"]]
        for length in lengths:
            order = np.argsort(-(np.stack([vecs[length][p] for p in passages]) @ q), kind="stable")
            ranked = [it["candidates"][i]["id"] for i in order]
            recalls[length].append(recall_at_k(set(it["relevant_ids"]), ranked, k))
    pieces = np.array([len(embedder.tokenizer(t)["input_ids"]) for t in texts]) if texts else np.zeros(1)
    ref = np.array(recalls[lengths[0]])
    rows = []
    for length in lengths:
        d, lo, hi = paired_bootstrap(np.array(recalls[length]), ref)
        rows.append(
            {
                "max_seq_length": length,
                "passages_per_s": round(speed[length], 1),
                f"recall@{k}": round(float(np.mean(recalls[length])), 4),
                "diff": round(d, 4),
                "ci95_low": round(lo, 4),
                "ci95_high": round(hi, 4),
                "passages_truncated": round(float(np.mean(pieces > length)), 4),
            }
        )
    return {"queries": len(items), "passages": len(texts), "word_pieces_p50": int(np.median(pieces)), "rows": rows}


def table(result: dict):
    from rich.table import Table

    t = Table(
        title=f"Passages embedded at each max_seq_length: {result['queries']} queries, {result['passages']} passages "
        f"(word pieces p50 {result['word_pieces_p50']}); diff vs the first length"
    )
    for col in ("max_seq_length", "passages/s", "truncated", "recall@5", "diff [95 % CI]"):
        t.add_column(col, justify="right")
    for r in result["rows"]:
        t.add_row(
            str(r["max_seq_length"]),
            f"{r['passages_per_s']:.1f}",
            f"{r['passages_truncated']:.0%}",
            f"{r['recall@5']:.4f}",
            f"{r['diff']:+.4f} [{r['ci95_low']:+.4f}, {r['ci95_high']:+.4f}]",
        )
    return t
