"""Which parts of the cross-encoder's fusion help: one trained `train_ce` model, its scores fused four
ways, Recall@5 side by side on the evaluate benchmarks (candidates in similarity order, as evaluate
hands them to a selector) and on the stage's own val split (the served order).

    python -m eval.fusion_ablation [--model-dir models/cross_encoder] [--max-queries 100]

Variants: the retrieval order; the model alone; + the position prior; + the prior and BM25. Each
fusion is fitted on the calibration queries of the feedback log, as `train_ce` fits its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from retrieval.params import load_section
from retrieval.selection import ce_passage, fuse_for

from .evaluate import EvaluateParams, bench_name, feedback_items, load_items, similarity_ranking

VARIANTS = ("retrieval order", "model alone", "+ position prior", "+ position prior + BM25")


def recall5(scores: list[float], ids: list[str], relevant: set[str]) -> float:
    top = sorted(range(len(ids)), key=lambda j: (-scores[j], j))[:5]
    return len(relevant & {ids[j] for j in top}) / len(relevant)


def variant_scores(model_scores: list[float], texts: list[str], query: str, fusions: dict) -> dict[str, list[float]]:
    return {"retrieval order": [-float(j) for j in range(len(texts))], "model alone": model_scores,
            "+ position prior": fuse_for(query, texts, model_scores, fusions["position"]),
            "+ position prior + BM25": fuse_for(query, texts, model_scores, fusions["position+bm25"])}  # fmt: skip


def run(model_dir: Path, max_queries: int, params: str = "params.yaml") -> dict:
    from sentence_transformers import CrossEncoder

    from retrieval.embed import get_embedder
    from training.build import BuildParams
    from training.ce_data import fit_fusion, rankings
    from training.train_ce import CrossEncoderParams, ce_scores

    ce = load_section(params, "train_ce", CrossEncoderParams)
    ep = load_section(params, "evaluate", EvaluateParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    records = [json.loads(line) for line in Path(ce.feedback, "feedback.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    model = CrossEncoder(str(model_dir / "model"))
    calibration = rankings(records, "calibration", val_fraction, ce.calibration_fraction)
    if not calibration:
        raise SystemExit("fusion_ablation: no calibration queries in the feedback log")
    cal_scores = ce_scores(model, calibration)
    fusions = {"position": fit_fusion(calibration, cal_scores, lexical=False), "position+bm25": fit_fusion(calibration, cal_scores)}
    out: dict = {"calibration_queries": len(calibration), "weights": fusions, "benchmarks": {}}

    val = rankings(records, "val", val_fraction, ce.calibration_fraction)
    per = {v: [] for v in VARIANTS}
    for g, s in zip(val, ce_scores(model, val)):
        ids = [str(i) for i in range(len(g["texts"]))]
        for v, scores in variant_scores(s, g["texts"], g["query"], fusions).items():
            per[v].append(recall5(scores, ids, {str(u) for u in g["used"]}))
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
            s = model.predict([(it["query"], t) for t in texts], activation_fn=None, show_progress_bar=False).tolist()
            for v, scores in variant_scores(s, texts, it["query"], fusions).items():
                per[v].append(recall5(scores, order, set(it["relevant_ids"])))
        out["benchmarks"][name] = {"queries": len(items), **{v: round(float(np.mean(r)), 4) for v, r in per.items()}}
    return out


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", type=Path, default=Path("models/cross_encoder"))
    ap.add_argument("--max-queries", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = run(a.model_dir, a.max_queries)
    if a.json:
        print(json.dumps(result, indent=2))
        return
    t = Table(title=f"fusion ablation: Recall@5 (fusions fitted on {result['calibration_queries']} calibration queries)")
    for col in ("benchmark", "queries", *VARIANTS):
        t.add_column(col, justify="left" if col == "benchmark" else "right")
    for name, row in result["benchmarks"].items():
        t.add_row(name, str(row["queries"]), *[f"{row[v]:.4f}" for v in VARIANTS])
    Console().print(t)


if __name__ == "__main__":
    main()
