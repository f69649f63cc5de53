"""Which parts of the cross-encoder's fusion help: one trained `train_ce` model, served as the service
serves it, its scores fused several ways, Recall@5 side by side on the evaluate benchmarks (candidates
in similarity order, as evaluate hands them to a selector) and on the stage's own val split (the served order).

    python -m eval.fusion_ablation [--model-dir models/cross_encoder] [--max-queries 100] [--dtype auto]

Variants: the retrieval order; the prior and BM25 without the model (what the fusion gives for free);
the model alone; + the position prior; + the prior and BM25. Each fusion is fitted on the calibration
queries of the model's own feedback log and split, as `train_ce` fits its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from retrieval.params import load_section
from retrieval.selection import ce_passage, fuse_for

from .evaluate import EvaluateParams, bench_name, feedback_items, load_items, similarity_ranking

VARIANTS = ("retrieval order", "prior + BM25, no model", "model alone", "+ position prior", "+ position prior + BM25")


def recall5(scores: list[float], ids: list[str], relevant: set[str]) -> float:
    top = sorted(range(len(ids)), key=lambda j: (-scores[j], j))[:5]
    return len(relevant & {ids[j] for j in top}) / len(relevant)


def variant_scores(model_scores: list[float], texts: list[str], query: str, fusions: dict) -> dict[str, list[float]]:
    return {"retrieval order": [-float(j) for j in range(len(texts))],
            "prior + BM25, no model": fuse_for(query, texts, [0.0] * len(texts), fusions["no model"]), "model alone": model_scores,
            "+ position prior": fuse_for(query, texts, model_scores, fusions["position"]),
            "+ position prior + BM25": fuse_for(query, texts, model_scores, fusions["position+bm25"])}  # fmt: skip


def run(model_dir: Path, max_queries: int, params: str = "params.yaml", dtype: str | None = None) -> dict:
    from retrieval.embed import get_embedder
    from serving.cross_encoder import CrossEncoderSelector
    from training.ce_data import fit_fusion, rankings

    ep = load_section(params, "evaluate", EvaluateParams)
    cfg = json.loads((model_dir / "ce_config.json").read_text(encoding="utf-8"))
    val_fraction, cal_fraction = cfg["val_fraction"], cfg["calibration_fraction"]
    feedback = Path(cfg["feedback"], "feedback.jsonl")
    records = [json.loads(line) for line in feedback.read_text(encoding="utf-8").splitlines() if line.strip()]
    selector = CrossEncoderSelector(model_dir, "ablation", dtype=dtype)
    scores = lambda groups: [selector.score_texts(g["query"], g["texts"]) for g in groups]  # noqa: E731
    calibration = rankings(records, "calibration", val_fraction, cal_fraction)
    if not calibration:
        raise SystemExit(f"fusion_ablation: no calibration queries in {feedback}")
    cal_scores = scores(calibration)
    fusions = {"position": fit_fusion(calibration, cal_scores, lexical=False), "position+bm25": fit_fusion(calibration, cal_scores),
               "no model": fit_fusion(calibration, [[0.0] * len(g["texts"]) for g in calibration])}  # fmt: skip
    out: dict = {"model": str(model_dir), "layers": selector.model.config.num_hidden_layers, "max_length": selector.max_length,
                 "dtype": selector.dtype, "calibration_queries": len(calibration), "weights": fusions, "benchmarks": {}}  # fmt: skip

    val = rankings(records, "val", val_fraction, cal_fraction)
    per = {v: [] for v in VARIANTS}
    for g, s in zip(val, scores(val)):
        ids = [str(i) for i in range(len(g["texts"]))]
        for v, fused in variant_scores(s, g["texts"], g["query"], fusions).items():
            per[v].append(recall5(fused, ids, {str(u) for u in g["used"]}))
    out["benchmarks"]["train_ce val (served order)"] = {"queries": len(val), **{v: round(float(np.mean(r)), 4) for v, r in per.items()}}

    embedder = get_embedder()
    benches = {bench_name(b): load_items(Path(b), max_queries) for b in ep.benchmarks.split(",") if b}
    benches["feedback/val"] = feedback_items(Path(ep.feedback), ep.val_fraction, max_queries)
    for name, items in benches.items():
        per = {v: [] for v in VARIANTS}
        for it in items:
            order = similarity_ranking(embedder, it)
            by_id = {c["id"]: c for c in it["candidates"]}
            texts = [ce_passage(by_id[i].get("title"), by_id[i]["text"]) for i in order]
            for v, fused in variant_scores(selector.score_texts(it["query"], texts), texts, it["query"], fusions).items():
                per[v].append(recall5(fused, order, set(it["relevant_ids"])))
        out["benchmarks"][name] = {"queries": len(items), **{v: round(float(np.mean(r)), 4) for v, r in per.items()}}
    return out


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", type=Path, default=Path("models/cross_encoder"))
    ap.add_argument("--max-queries", type=int, default=100)
    ap.add_argument("--dtype", default=None, help="float32 | bfloat16 | auto (default: the model's serve_dtype)")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    a = ap.parse_args()
    result = run(a.model_dir, a.max_queries, dtype=a.dtype)
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n")
    t = Table(title=f"fusion ablation: Recall@5 of {result['model']} ({result['layers']} layers, {result['max_length']} word pieces, "
                    f"{result['dtype']}; fusions fitted on {result['calibration_queries']} calibration queries)")  # fmt: skip
    for col in ("benchmark", "queries", *VARIANTS):
        t.add_column(col, justify="left" if col == "benchmark" else "right")
    for name, row in result["benchmarks"].items():
        t.add_row(name, str(row["queries"]), *[f"{row[v]:.4f}" for v in VARIANTS])
    Console().print(t)


if __name__ == "__main__":
    main()
