"""The embedder's backends side by side (`pai lab bench embed`): speed, parity with the torch fp32 reference, and
Recall@5 of the cosine order, all in one run on one machine.

Passages are a contract-5 file's distinct candidates (SciFact test by default: real abstracts, most of them cut
at 256 word pieces), embedded by each backend afresh (no vector cache); queries are embedded one at a time, as
the service does. The first backend is the reference every other is compared with.

    pai lab bench embed --backends torch:f32,openvino:f32,openvino:auto --max-queries 100
"""

from __future__ import annotations

import time

import numpy as np

from eval.systems import passage_texts
from retrieval.contracts.metrics import paired_bootstrap, recall_at_k
from retrieval.contracts.passage import passage_text
from retrieval.embed import Embedder


def parse_backends(spec: str) -> list[tuple[str, str]]:
    """ "torch:f32,openvino:auto" -> [("torch", "f32"), ("openvino", "auto")]; a backend alone means precision auto."""
    out = []
    for part in spec.split(","):
        backend, _, precision = part.strip().partition(":")
        out.append((backend, precision or "auto"))
    if not out or len(set(out)) != len(out):
        raise ValueError("--backends: at least one backend[:precision], each once")
    return out


def run(items: list[dict], backends: list[tuple[str, str]], batch_size: int = 32, k: int = 5, progress=None) -> dict:
    texts = passage_texts(items)
    queries = [it["query"] for it in items]
    rows, vectors, recalls = [], [], []
    for backend, precision in backends:
        emb = Embedder(batch_size, backend, precision)
        emb.encode(texts[-batch_size:])  # warm up on the longest passages
        t0 = time.perf_counter()
        vecs = emb.encode(texts)
        rate = len(texts) / max(time.perf_counter() - t0, 1e-9)
        times, qvecs = [], []
        for q in queries:
            t1 = time.perf_counter()
            qvecs.append(emb.encode([q])[0])
            times.append(time.perf_counter() - t1)
        by_text = dict(zip(texts, vecs))
        rec = []
        for it, qv in zip(items, qvecs):
            cands = it["candidates"]
            m = np.stack([by_text[passage_text(c.get("title"), c["text"], c.get("parent_heading"))] for c in cands])
            order = np.argsort(-(m @ qv), kind="stable")
            rec.append(recall_at_k(set(it["relevant_ids"]), [cands[i]["id"] for i in order], k))
        vectors.append(vecs)
        recalls.append(np.array(rec))
        row = {
            "backend": backend,
            "precision": emb.precision,
            "passages_per_s": round(rate, 1),
            "query_p50_ms": round(1000 * float(np.median(times)), 2),
            f"recall@{k}": round(float(recalls[-1].mean()), 4),
        }
        cos = (vecs * vectors[0]).sum(1)
        d, lo, hi = paired_bootstrap(recalls[-1], recalls[0])
        row.update(
            speedup=round(rate / rows[0]["passages_per_s"], 2) if rows else 1.0,
            cos_min=round(float(cos.min()), 6),
            cos_mean=round(float(cos.mean()), 6),
            diff=round(d, 4),
            ci95_low=round(lo, 4),
            ci95_high=round(hi, 4),
        )
        rows.append(row)
        if progress:
            progress()
    return {"queries": len(items), "passages": len(texts), "batch_size": batch_size, "rows": rows}


def table(result: dict, machine: str):
    from rich.table import Table

    t = Table(
        title=f"MiniLM embedding backends on {machine}: {result['passages']} passages, {result['queries']} queries "
        f"(batch {result['batch_size']}); parity and diff vs the first row"
    )
    for col in (
        "backend",
        "precision",
        "passages/s",
        "speedup",
        "query p50",
        "cosine min / mean",
        "recall@5",
        "diff [95 % CI]",
    ):
        t.add_column(col, justify="right")
    for r in result["rows"]:
        t.add_row(
            r["backend"],
            r["precision"],
            f"{r['passages_per_s']:.1f}",
            f"{r['speedup']:.2f}x",
            f"{r['query_p50_ms']:.1f} ms",
            f"{r['cos_min']:.5f} / {r['cos_mean']:.6f}",
            f"{r['recall@5']:.4f}",
            f"{r['diff']:+.4f} [{r['ci95_low']:+.4f}, {r['ci95_high']:+.4f}]",
        )
    return t
