"""Which parts of the cross-encoder's fusion help: one trained `train_ce` model, served as the service
serves it, its scores fused several ways, Recall@5 side by side on the evaluate benchmarks (candidates
in similarity order, as evaluate hands them to a selector) and on the stage's own val split (the served order).

    pai lab ablation [--model-dir models/cross_encoder] [--max-queries 100] [--dtype auto]

Variants: the retrieval order; the prior and BM25 without the model (what the fusion gives for free);
the model alone; + the position prior; + the prior and BM25. Each fusion is fitted on the calibration
queries of the model's own feedback log and split, as `train_ce` fits its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from rich.table import Table

from eval.evaluate import EvaluateParams
from eval.items import bench_name, feedback_items, load_items
from eval.systems import similarity_ranking
from retrieval.contracts.ce_input import ce_passage
from retrieval.contracts.learned_fusion import fuse_for
from retrieval.contracts.metrics import recall_at_k
from retrieval.embed import get_embedder
from retrieval.params import load_section
from serving.cross_encoder import CrossEncoderSelector
from training.build import BuildParams
from training.ce_data import fit_fusion, rankings

VARIANTS = ("retrieval order", "prior + BM25, no model", "model alone", "+ position prior", "+ position prior + BM25")


def recall5(scores: list[float], ids: list[str], relevant: set[str]) -> float:
    """Recall@5 of `ids` ranked by `scores` (ties: served order)."""
    return recall_at_k(relevant, [ids[j] for j in sorted(range(len(ids)), key=lambda j: (-scores[j], j))], 5)


def variant_scores(model_scores: list[float], texts: list[str], query: str, fusions: dict) -> dict[str, list[float]]:
    return {
        "retrieval order": [-float(j) for j in range(len(texts))],
        "prior + BM25, no model": fuse_for(query, texts, [0.0] * len(texts), fusions["no model"]),
        "model alone": model_scores,
        "+ position prior": fuse_for(query, texts, model_scores, fusions["position"]),
        "+ position prior + BM25": fuse_for(query, texts, model_scores, fusions["position+bm25"]),
    }


Sets = list[
    tuple[str, list[str], list[str], set[str]]
]  # (query, candidate ids in served order, their passages, relevant ids)


def benchmark_sets(max_queries: int, params: str = "params.yaml") -> dict[str, Sets]:
    """The evaluate benchmarks' candidates in similarity order, as evaluate hands them to a selector.
    Embeds every candidate, so a sweep computes them once for all its models."""
    ep = load_section(params, "evaluate", EvaluateParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction  # build's split, exactly
    embedder = get_embedder()
    benches = {bench_name(b): load_items(Path(b), max_queries) for b in ep.benchmarks.split(",") if b}
    benches["feedback/val"] = feedback_items(Path(ep.feedback), val_fraction, max_queries)
    out = {}
    for name, items in benches.items():
        out[name] = []
        for it in items:
            order = similarity_ranking(embedder, it)
            by_id = {c["id"]: c for c in it["candidates"]}
            out[name].append(
                (
                    it["query"],
                    order,
                    [ce_passage(by_id[i].get("title"), by_id[i]["text"]) for i in order],
                    set(it["relevant_ids"]),
                )
            )
    return out


def variant_recalls(selector, sets: Sets, fusions: dict) -> dict:
    """Mean Recall@5 of every variant over `sets`, scored by the served `selector`."""
    per = {v: [] for v in VARIANTS}
    for query, ids, texts, relevant in sets:
        for v, fused in variant_scores(selector.score_texts(query, texts), texts, query, fusions).items():
            per[v].append(recall5(fused, ids, relevant))
    return {"queries": len(sets), **{v: round(float(np.mean(r)), 4) for v, r in per.items()}}


def run(
    model_dir: Path,
    max_queries: int,
    params: str = "params.yaml",
    dtype: str | None = None,
    benches: dict[str, Sets] | None = None,
) -> dict:
    """The ablation of one model; `benches` = `benchmark_sets(max_queries, params)`, computed here when None."""
    cfg = json.loads((model_dir / "ce_config.json").read_text(encoding="utf-8"))
    val_fraction, cal_fraction = cfg["val_fraction"], cfg["calibration_fraction"]
    feedback = Path(cfg["feedback"], "feedback.jsonl")
    records = [json.loads(line) for line in feedback.read_text(encoding="utf-8").splitlines() if line.strip()]
    selector = CrossEncoderSelector(model_dir, "ablation", dtype=dtype)
    calibration = rankings(records, "calibration", val_fraction, cal_fraction)
    if not calibration:
        raise SystemExit(f"fusion_ablation: no calibration queries in {feedback}")
    cal_scores = [selector.score_texts(g["query"], g["texts"]) for g in calibration]
    fusions = {
        "position": fit_fusion(calibration, cal_scores, lexical=False),
        "position+bm25": fit_fusion(calibration, cal_scores),
        "no model": fit_fusion(calibration, [[0.0] * len(g["texts"]) for g in calibration]),
    }
    out: dict = {
        "model": str(model_dir),
        "layers": selector.model.config.num_hidden_layers,
        "max_length": selector.max_length,
        "dtype": selector.dtype,
        "calibration_queries": len(calibration),
        "weights": fusions,
        "benchmarks": {},
    }

    val = [
        (g["query"], [str(i) for i in range(len(g["texts"]))], g["texts"], {str(u) for u in g["used"]})
        for g in rankings(records, "val", val_fraction, cal_fraction)
    ]
    out["benchmarks"]["train_ce val (served order)"] = variant_recalls(selector, val, fusions)
    for name, sets in (benchmark_sets(max_queries, params) if benches is None else benches).items():
        out["benchmarks"][name] = variant_recalls(selector, sets, fusions)
    return out


def table(result: dict) -> Table:
    t = Table(
        title=f"fusion ablation: Recall@5 of {result['model']} ({result['layers']} layers, {result['max_length']} word pieces, "
        f"{result['dtype']}; fusions fitted on {result['calibration_queries']} calibration queries)"
    )
    for col in ("benchmark", "queries", *VARIANTS):
        t.add_column(col, justify="left" if col == "benchmark" else "right")
    for name, row in result["benchmarks"].items():
        t.add_row(name, str(row["queries"]), *[f"{row[v]:.4f}" for v in VARIANTS])
    return t
