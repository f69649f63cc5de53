"""`pai lab bench capture`: how well capture keeps durable facts and drops chatter, on a labelled set
(data/capture/labelled.jsonl, made by `write_labelled`; see data/capture/README.md), in a scratch
database so the measurement starts cold and leaves nothing behind.

1. stream: the noise of split "stream" goes through the full pipeline, in order; at 0, 25, 50, 100,
   200, 300, 400, 500 rejections the noise gate alone is scored on the held-out exchanges (split
   "eval") that reach it: share of noise it rejects (recall), share of durable it rejects (loss),
   at params' threshold and a sweep of others.
2. eval: the split "eval" (durable passages, held-out noise, hand-written hard cases) goes through
   the full pipeline with what was learned: precision/recall of "stored" (positive = durable),
   per gate, the hard cases one by one, time per capture, and whether the stored facts are found
   again by search (the exchange's question, top 5)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from retrieval.conversation import capture, intake, noise
from retrieval.conversation.capture import CaptureParams
from retrieval.conversation.capture_rules import is_procedural, strip_code
from retrieval.conversation.intake import Exchange
from retrieval.db import DatabaseError, connect, scratch_database
from retrieval.embed import get_embedder
from retrieval.params import EmbedParams, IngestParams, ParamsError, SearchParams, load_section
from retrieval.query.search import search
from serving.extractor import build_extractor
from serving.interface import SelectorLoadError

from ..terminal import BENCH_INGEST, BenchDirOpt, JsonOpt, OutOpt, ParamsOpt, _fail, console, emit, judged_dir
from . import capture_data

app = typer.Typer()

CHECKPOINTS = (0, 25, 50, 100, 200, 300, 400, 500)
SWEEP = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
SEED = 13


def write_labelled(benchmark_dir: Path, hard: Path, out: Path) -> int:
    """The labelled set: 150 SciFact abstracts and 150 HotpotQA passages wrapped as answers (durable),
    550 + 200 generated chatter exchanges (noise; stream and held-out use disjoint vocabularies), and
    the hand-written hard cases. Deterministic (seed 13)."""
    rng = random.Random(SEED)
    rows = [{**r, "kind": "durable-passage", "split": "eval"} for r in capture_data.durable(benchmark_dir, rng)]
    rows += [{**r, "split": "stream"} for r in capture_data.noise(rng, 550, held_out=False)]
    rows += [{**r, "split": "eval"} for r in capture_data.noise(rng, 200, held_out=True)]
    rows += [
        {**json.loads(line), "kind": "hard", "split": "eval"} for line in hard.read_text().splitlines() if line.strip()
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def run(labelled: Path, params: Path, log: Callable[[str], None] = print) -> dict:
    rows = [json.loads(line) for line in labelled.read_text().splitlines() if line.strip()]
    cp = load_section(params, "capture", CaptureParams)
    ip, sp = load_section(params, "ingest", IngestParams), load_section(params, "search", SearchParams)
    embedder = get_embedder(load_section(params, "embed", EmbedParams))
    extractor = build_extractor(cp)
    stream = [r for r in rows if r["split"] == "stream"]
    evals = [r for r in rows if r["split"] == "eval"]
    rng = random.Random(SEED)
    rng.shuffle(stream)
    rng.shuffle(evals)
    # the held-out exchanges that reach the noise gate, embedded once
    reach = [r for r in evals if not is_procedural(r["assistant"], cp.prefilter_max_chars)]
    reach = [r for r in reach if len(strip_code(r["assistant"])) >= cp.min_chars]
    vectors = embedder.encode([strip_code(r["assistant"])[: noise.BUFFER_TEXT_CHARS] for r in reach])
    is_noise = np.array([r["label"] == "noise" for r in reach])
    out: dict = {
        "labelled": str(labelled),
        "exchanges": {"stream": len(stream), "eval": len(evals)},
        "decided_by": extractor.name if extractor else "rules",
        "params": {
            k: getattr(cp, k) for k in ("min_chars", "noise_threshold", "noise_rebuild_every", "noise_prototypes")
        },
    }
    with scratch_database("pai_bench_capture") as url, connect(url) as conn:
        # 1. the noise gate learning from a stream of rejections
        curve, todo = [], list(CHECKPOINTS)
        log(f"stream: {len(stream)} noise exchanges")
        for r in [None, *stream]:
            if r is not None:
                capture.process(conn, intake.submit(conn, _exchange(r)), cp, ip, sp, embedder, extractor)
            protos = noise.load(conn)
            while todo and protos.rejections >= todo[0]:
                curve.append(_gate_scores(protos, vectors, is_noise, cp.noise_threshold, todo.pop(0)))
        out["noise_curve"] = curve
        out["noise_sweep"] = [_gate_scores(protos, vectors, is_noise, t, protos.rejections) for t in SWEEP]
        out["noise_prototypes"] = protos.examples

        # 2. the held-out set through the full pipeline
        log(f"eval: {len(evals)} exchanges")
        results, seconds = [], []
        for i, r in enumerate(evals, start=1):
            if i % 100 == 0:
                log(f"  {i}/{len(evals)}")
            t0 = time.perf_counter()
            res = capture.process(conn, intake.submit(conn, _exchange(r)), cp, ip, sp, embedder, extractor)
            seconds.append(time.perf_counter() - t0)
            results.append(res)
        out.update(_scores(evals, results, seconds))
        out["search_recall_at_5"] = _searchable(conn, evals, results, embedder, sp)
        out["counters"] = capture.counters(conn)
    return out


def _exchange(r: dict) -> Exchange:
    return Exchange(r["user"], r["assistant"], "bench", r.get("id"))


def _gate_scores(protos, vectors, is_noise, threshold: float, rejections: int) -> dict:
    if protos.cold:
        rejected = np.zeros(len(vectors), dtype=bool)
    else:
        rejected = np.max(vectors @ protos.centroids.T, axis=1) >= threshold
    return {
        "rejections": rejections,
        "prototypes": len(protos.centroids),
        "threshold": threshold,
        "noise_recall": round(float(rejected[is_noise].mean()), 3) if is_noise.any() else None,
        "durable_rejected": round(float(rejected[~is_noise].mean()), 3) if (~is_noise).any() else None,
        "noise_reaching": int(is_noise.sum()),
        "durable_reaching": int((~is_noise).sum()),
    }


def _scores(rows: list[dict], results: list, seconds: list[float]) -> dict:
    kept = np.array([r.status in ("stored", "duplicate") for r in results])
    durable = np.array([r["label"] == "durable" for r in rows])
    tp, fp, fn = int((kept & durable).sum()), int((kept & ~durable).sum()), int((~kept & durable).sum())
    overall = {
        "durable": int(durable.sum()),
        "noise": int((~durable).sum()),
        "stored_durable": tp,
        "stored_noise": fp,
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / (tp + fn), 3) if tp + fn else None,
    }
    gates, reaching_noise, reaching_durable = {}, int((~durable).sum()), int(durable.sum())
    for g in capture.GATES:
        hit = np.array([r.gate == g for r in results])
        n_noise, n_durable = int((hit & ~durable).sum()), int((hit & durable).sum())
        gates[g] = {
            "rejected_noise": n_noise,
            "rejected_durable": n_durable,
            "precision": round(n_noise / (n_noise + n_durable), 3) if n_noise + n_durable else None,
            "recall": round(n_noise / reaching_noise, 3) if reaching_noise else None,  # of the noise reaching it
            "noise_reaching": reaching_noise,
            "durable_reaching": reaching_durable,
        }
        reaching_noise, reaching_durable = reaching_noise - n_noise, reaching_durable - n_durable
    ms = np.array(seconds) * 1000
    hard = [
        {
            "id": row["id"],
            "label": row["label"],
            "outcome": res.status,
            "gate": res.gate,
            "right": (res.status in ("stored", "duplicate")) == (row["label"] == "durable"),
            "note": row.get("note"),
        }
        for row, res in zip(rows, results)
        if row["kind"] == "hard"
    ]
    per_kind: dict = {}
    for row, k in zip(rows, kept):
        d = per_kind.setdefault(row["kind"], {"n": 0, "stored": 0})
        d["n"], d["stored"] = d["n"] + 1, d["stored"] + int(k)
    return {
        "overall": overall,
        "gates": gates,
        "per_kind": per_kind,
        "hard": hard,
        "hard_right": sum(h["right"] for h in hard),
        "ms_per_capture": {
            "mean": round(float(ms.mean()), 1),
            "p50": round(float(np.percentile(ms, 50)), 1),
            "p95": round(float(np.percentile(ms, 95)), 1),
            "stored_mean": round(float(ms[kept].mean()), 1) if kept.any() else None,
            "rejected_mean": round(float(ms[~kept].mean()), 1) if (~kept).any() else None,
        },
        "facts_per_stored": round(sum(len(r.fact_ids) for r in results) / max(1, int(kept.sum())), 2),
    }


def _searchable(conn, rows, results, embedder, sp, n: int = 50) -> dict:
    """Of the first `n` stored durable passages: is one of their facts in the top 5 for their question?"""
    pairs = [(row, res) for row, res in zip(rows, results) if res.fact_ids and row["kind"] == "durable-passage"][:n]
    hits = 0
    for row, res in pairs:
        found = search(conn, embedder, row["user"], sp)
        hits += any(c.chunk_id in res.fact_ids for c in found.candidates[:5])
    return {"queries": len(pairs), "recall_at_5": round(hits / len(pairs), 3) if pairs else None}


def print_tables(result: dict, console) -> None:
    t = Table(title=f"noise gate, held-out (threshold {result['params']['noise_threshold']})")
    for col in ("rejections", "prototypes", "noise recall", "durable rejected"):
        t.add_column(col)
    for c in result["noise_curve"]:
        t.add_row(str(c["rejections"]), str(c["prototypes"]), str(c["noise_recall"]), str(c["durable_rejected"]))
    console.print(t)
    t = Table(title="noise gate threshold sweep (after the stream)")
    for col in ("threshold", "noise recall", "durable rejected"):
        t.add_column(col)
    for c in result["noise_sweep"]:
        t.add_row(str(c["threshold"]), str(c["noise_recall"]), str(c["durable_rejected"]))
    console.print(t)
    o = result["overall"]
    console.print(
        f"stored: precision {o['precision']}, recall {o['recall']} ({o['stored_durable']}/{o['durable']} durable, "
        f"{o['stored_noise']}/{o['noise']} noise stored); decided by {result['decided_by']}; "
        f"hard cases right {result['hard_right']}/{len(result['hard'])}; search recall@5 {result['search_recall_at_5']}",
        soft_wrap=True,
    )
    t = Table(title="per gate (eval split, in order)")
    for col in ("gate", "noise rejected", "durable rejected", "precision", "recall of noise reaching it"):
        t.add_column(col)
    for g, d in result["gates"].items():
        t.add_row(g, str(d["rejected_noise"]), str(d["rejected_durable"]), str(d["precision"]), str(d["recall"]))
    console.print(t)
    console.print(f"ms per capture: {result['ms_per_capture']}", soft_wrap=True)
    for h in result["hard"]:
        if not h["right"]:
            console.print(f"  hard case wrong: {h['id']} ({h['label']}) -> {h['outcome']} by {h['gate']}: {h['note']}")


@app.command(
    "capture", rich_help_panel=BENCH_INGEST, short_help="Capture's gates: precision/recall, time, the noise gate."
)
def bench_capture_command(
    labelled: Annotated[Path, typer.Option(help="the labelled exchanges")] = Path("data/capture/labelled.jsonl"),
    rebuild_set: Annotated[
        bool,
        typer.Option("--rebuild-set", help="first regenerate LABELLED from the benchmark and data/capture/hard.jsonl"),
    ] = False,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Precision/recall of "stored" overall and per gate, time per capture, and the noise gate's
    recall as it learns from a stream of rejections (held-out part), in a scratch database."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        if rebuild_set:
            n = write_labelled(benchmark_dir, labelled.parent / "hard.jsonl", labelled)
            console.print(f"wrote {n} labelled exchanges to {labelled}")
        result = run(labelled, params, log=console.print)
    except (ParamsError, DatabaseError, SelectorLoadError, OSError, ValueError) as e:
        _fail(str(e))
    emit(result, as_json, out, lambda c: print_tables(result, c))
