"""Which cross-encoder size to serve: `train_ce` trained once per (layers, max_length), each timed in
every precision (`eval.bench.ce`) and scored with its fusion variants (`cli.fusion_ablation`), side by
side in one table. Every other setting is the params file's `train_ce`; each model is an MLflow run.

    pai lab sweep ce --config 3x128 --config 3x64 [--dtypes float32,auto] [--models-dir models/ce_sweep] [--out FILE]

A folder already trained with the same layers, max_length and feedback is reused (`--retrain` to redo).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from eval.bench.ce import bench, hotpotqa_sets, scifact_sets
from retrieval.params import load_section
from training.build import BuildParams
from training.train_ce import CrossEncoderParams, train

from .fusion_ablation import benchmark_sets
from .fusion_ablation import run as ablation

FUSED, NO_MODEL = "+ position prior + BM25", "prior + BM25, no model"


def parse_config(text: str) -> tuple[int, int]:
    """'3x64' -> (3 layers, max_length 64)."""
    try:
        layers, max_length = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"{text!r}: expected LAYERSxMAX_LENGTH, e.g. 3x64") from None
    return layers, max_length


def trained(folder: Path, layers: int, max_length: int, feedback: str) -> bool:
    try:
        cfg = json.loads((folder / "ce_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (cfg.get("layers"), cfg.get("max_length"), cfg.get("feedback")) == (layers, max_length, feedback)


def sweep(
    configs: list[tuple[int, int]],
    out: Path,
    dtypes: list[str],
    benchmark: Path,
    queries: int,
    max_queries: int,
    params: str = "params.yaml",
    retrain: bool = False,
    log=print,
) -> list[dict]:
    base = load_section(params, "train_ce", CrossEncoderParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    sets = {
        "hotpotqa": hotpotqa_sets(benchmark / "hotpotqa" / "test.jsonl", queries),
        "scifact": scifact_sets(benchmark / "scifact", queries),
    }
    benches = benchmark_sets(max_queries, params)  # embedded once, scored by every model
    rows = []
    for layers, max_length in configs:
        folder = out / f"{layers}x{max_length}"
        if retrain or not trained(folder, layers, max_length, base.feedback):
            log(f"ce_sweep: training {folder} ({layers} layers, {max_length} word pieces)")
            train(replace(base, layers=layers, max_length=max_length, out=str(folder)), val_fraction)
        for dtype in dict.fromkeys(dtypes):
            log(f"ce_sweep: {folder} in {dtype}: recall, then latency")
            rec = ablation(folder, max_queries, params, dtype=dtype, benches=benches)
            ms = {name: bench(folder, s, threads=None, dtype=dtype) for name, s in sets.items()}
            rows.append(
                {
                    "config": f"{layers}x{max_length}",
                    "layers": layers,
                    "max_length": max_length,
                    "dtype": rec["dtype"],
                    "latency": ms,
                    "recall": rec["benchmarks"],
                    "weights": rec["weights"]["position+bm25"],
                }
            )
    return rows


def table(rows: list[dict]):
    """Rich table: per config and precision, p50 per dataset, then per benchmark Recall@5 fused / model alone / prior + BM25 alone."""
    benches = list(rows[0]["recall"])
    t = Table(
        title="cross-encoder sweep: p50 ms of one answer over 20 candidates; Recall@5 fused / model alone / without the model"
    )
    for col in ("config", "dtype", *(f"p50 {d}" for d in rows[0]["latency"]), *benches):
        t.add_column(col, justify="left" if col in ("config", "dtype") else "right")
    for r in rows:
        t.add_row(
            r["config"],
            r["dtype"],
            *(f"{v['p50_ms']:.1f}" for v in r["latency"].values()),
            *(" / ".join(f"{r['recall'][b][v]:.3f}" for v in (FUSED, "model alone", NO_MODEL)) for b in benches),
        )
    return t
