"""Stage `train_ranker`: a selector that learns from the feedback log without relearning relevance.

It starts from what the first stage already knows (MiniLM's cosine, BM25, the retrieval order) and
adds what the feedback teaches, so its first ranking is the baseline's and training can only move it:
1. embed: every query and shown candidate of the feedback log with the base model (all-MiniLM-L6-v2,
   the vectors the store holds), once.
2. adapter: a 384x384 query-side map (q' = q + q W, W = 0 at the start) fitted on the *train* queries
   by a listwise softmax over each query's candidates (the used ones up), with an L2 pull of W toward 0
   (the base model): the domain's way of asking, without re-embedding a passage.
3. fusion: the weights of `retrieval.contracts.ranking_features` (similarity, adapted, BM25; `FITTED`), fitted the
   same listwise way on *calibration* queries that the adapter never saw; with
   `cross_folds` k, on every train and calibration query's scores from an adapter fitted without its fold (of k),
   and the adapter served on all of them (cross-fitting: the fusion sees held-out scores, the adapter 85 % of the log).
   The retrieval position is not fitted: the ranking depends on the candidates, not on the order a first stage
   gave them (the log's order is hybrid search's; an evaluation's or another caller's differs).
4. domain gate: the fitted weights hold for queries like the feedback's, so the ranker keeps the train
   queries' vectors and a ramp [lo, hi] of affinity (mean cosine to the k nearest train queries): `hi` is
   the `domain_quantile` of the calibration queries' affinities (in-domain queries it never trained on),
   `lo` = hi - `domain_ramp`. Below the ramp the *general* weights score (standardised cosine + BM25).
5. select: val Recall@k of the retrieval order, the cosine order, the adapter alone, the fitted
   fusion, the general fusion and the gated ranker, side by side; the gated ranker is what is served.
6. write: `adapter.npy`, `queries.npy` (the gate's train query vectors), `ranker_config.json` (input
   format, base model, weights, gate, val figures, dataset hash, MLflow run id), `metrics.json`.

`train` (steps 1 to 5): the pulled records in, the ranker out, no log read, no git asked (the vectors come from
the shared embedder); `main` reads the log, stamps the record with its hash and the commit, and writes. The
fits of steps 2 to 4 live in `ranker_fit.py`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress

from retrieval.contracts.metrics import paired_bootstrap
from retrieval.contracts.ranking_features import (
    FEATURES,
    RANKER_FORMAT,
    domain_affinity,
    domain_gate,
    features,
    gated_scores,
    general_floor,
    ranker_scores,
)
from retrieval.contracts.recalled import RECALL_FLOOR, Bank, recalled_feature
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.logs.feedback_records import FEEDBACK_FILE
from retrieval.params import UsedParams, load_section
from retrieval.progress import make_progress
from retrieval.tracking import git_commit, use_mlflow

from .build import BuildParams
from .feedback_rankings import embed_groups, feedback_groups, ips_recall, ips_recalls, mean_recall
from .ranker_fit import fit_adapter, fit_gate, fit_weights, out_of_fold

ADAPTER_FILE, QUERIES_FILE = "adapter.npy", "queries.npy"
CONFIG_FILE, METRICS_FILE = "ranker_config.json", "metrics.json"
# the fusion's fitted features: the retrieval position (`prior`) is reported as a baseline, never fitted; `recalled` is
# weighed afterwards, by the held-out Recall@k it gives (`recalled_weight`)
FITTED = tuple(f for f in FEATURES if f not in ("prior", "recalled"))
RECALLED_WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the `recalled` weights tried, the smallest best kept


@dataclass(frozen=True)
class RankerParams:
    """The train_ranker stage: the fast learned ranker (a query adapter and fitted fusion weights, with the general
    weights for queries unlike the feedback's). Also read by `pai lab loop report`."""

    feedback: str = "data/feedback"
    """the pull stage's folder (used = positive, ignored = negative)"""
    out: str = "models/ranker"
    """declared once, evaluate and deploy alias it; adapter.npy, ranker_config.json, metrics.json"""
    adapter_l2: float = 0.015
    """pull of the query adapter toward the base model (W = 0): higher keeps more of the general case (why this value:
    docs/measurements.md, "A weaker pull on the adapter")"""
    adapter_steps: int = 200
    """full-batch Adam steps over the train queries (seconds on CPU: the vectors are computed once)"""
    adapter_lr: float = 0.01
    """the adapter's Adam learning rate"""
    temperature: float = 0.05
    """softmax temperature over cosines (MiniLM's cosines within 20 candidates span ~0.2)"""
    fusion_l2: float = 0.01
    """L2 on the fusion weights (similarity, adapted, bm25), fitted on calibration queries"""
    calibration_fraction: float = 0.15
    """train queries held out of the adapter; the fusion weights are fitted on them"""
    domain_k: int = 10
    """domain gate: a query's affinity is the mean cosine of its this many nearest feedback train queries"""
    domain_quantile: float = 0.05
    """the domain gate's hi: this quantile of the calibration queries' affinities"""
    domain_ramp: float = 0.1
    """the domain gate's lo = hi - ramp: at or below it the general weights score alone"""
    general_bm25: float = 1.0
    """the general weights (for queries unlike the feedback's): standardised cosine 1.0 + BM25 this much; the same
    number as search.general_bm25 (`pai lab bench general`)"""
    bm25_sd_floor: float = 0.2
    """BM25 feature = (raw - mean) / max(sd, this): candidates that all contain the query's words carry no keyword
    evidence, and it gets no weight instead of standardised noise (`pai lab bench general --sd-floor`); also the general
    weights' floor for a query that names things"""
    general_plain_floor: float = 2.0
    """the general weights' BM25 sd floor for a query in plain words (no capitalised or rare word after its first): its
    BM25 keeps its raw size below about one rare word's evidence, since a lexical distractor shares ordinary words as
    well as the answer does; the same number as search.general_plain_floor"""
    name_ramp: float = 0.2
    """a query whose words after the first are this share capitalised or more (names, acronyms, identifiers) keeps
    bm25_sd_floor in the general weights; linear below, down to general_plain_floor at none"""
    rare_ramp: float = 0.3
    """or whose words are this share outside the embedder's vocabulary (retrieval/fusion.py: rare_share); the same
    number as search.rare_ramp"""
    k: int = 5
    """Recall@k of the val ranking"""
    ipw_clip: float = 0.05
    """a label weighs 1 / max(propensity, this): an explored chunk counts for those the policy hid; 1 = off"""
    fallback_tolerance: float = 0.05
    """where the fitted weights' held-out (inverse-propensity) Recall@5 trails the general weights' by more than this,
    and surely (paired 95 % CI below 0), the general weights serve in domain too: a few heavily weighed explored
    labels can fit a ranker far off"""
    recall_threshold: float = 0.6
    """the `recalled` feature (what past questions like the query cited, retrieval/contracts/recalled.py) reads a past
    question from this cosine similarity to the query up, weighed from 0 here to 1 at an identical question (1 = off); its
    weight is the one that gives the best held-out Recall@k (`recalled_weight`; docs/measurements.md, "What similar
    questions cited")"""
    cross_folds: int = 5
    """cross-fitting: this many adapters, each without one fold of train + calibration, score the fusion's data, and the
    one served learns from them all (docs/measurements.md, "Cross-fitting"); 0 = the calibration band alone"""
    seed: int = 13
    """the adapter's initialisation and fold seed"""

    def problems(self) -> list[str]:
        out = []
        if self.adapter_l2 < 0 or self.fusion_l2 < 0 or self.adapter_lr <= 0 or self.temperature <= 0:
            out.append("train_ranker: need adapter_l2, fusion_l2 >= 0 and adapter_lr, temperature > 0")
        if self.adapter_steps < 0 or self.k < 1 or not 0 < self.calibration_fraction < 1:
            out.append("train_ranker: need adapter_steps >= 0, k >= 1, 0 < calibration_fraction < 1")
        if self.domain_k < 1 or not 0 <= self.domain_quantile <= 1 or self.domain_ramp < 0 or self.general_bm25 < 0:
            out.append(
                "train_ranker: need domain_k >= 1, 0 <= domain_quantile <= 1, domain_ramp >= 0, general_bm25 >= 0"
            )
        if not (self.bm25_sd_floor >= 0 and self.general_plain_floor >= 0):
            out.append("train_ranker: need bm25_sd_floor >= 0 and general_plain_floor >= 0")
        if not (0 <= self.name_ramp <= 1 and 0 <= self.rare_ramp <= 1):
            out.append("train_ranker: need name_ramp and rare_ramp in [0, 1]")
        if not 0 < self.ipw_clip <= 1:
            out.append("train_ranker: need 0 < ipw_clip <= 1")
        if not RECALL_FLOOR <= self.recall_threshold <= 1:
            out.append(f"train_ranker: need recall_threshold in [{RECALL_FLOOR}, 1]")
        if self.fallback_tolerance < 0 or self.cross_folds < 0 or self.cross_folds == 1:
            out.append("train_ranker: need fallback_tolerance >= 0 and cross_folds 0 (off) or >= 2")
        return out


def recalled_weight(feats: list[dict], groups: list[dict], weights: dict[str, float], k: int) -> tuple[float, dict]:
    """The `recalled` weight: of RECALLED_WEIGHTS, the smallest giving the best inverse-propensity Recall@k on the
    fusion's (held-out) scores, the other weights as fitted; and each weight's Recall@k (for the metrics). Chosen by
    the metric, not the listwise loss: the loss's softmax wants calibrated scores, while a chunk that similar
    questions cited needs only to cross the k-th place, and the loss held it at about a third of the weight the
    held-out Recall@k asks for (docs/measurements.md, "What similar questions cited")."""
    if not any(f["recalled"].any() for f in feats):
        return 0.0, {}
    grid = {
        r: ips_recall(groups, [ranker_scores(f, weights | {"recalled": r}) for f in feats], k) for r in RECALLED_WEIGHTS
    }
    best = max(grid.values())
    return min(r for r, v in grid.items() if v >= best - 1e-9), {str(r): round(v, 4) for r, v in grid.items()}


class TooLittleFeedback(ValueError):
    """The log holds no train query with a used candidate: nothing to learn (the message is one line)."""


def train(
    records: list[dict], p: RankerParams, val_fraction: float, used: UsedParams, progress=None
) -> tuple[np.ndarray, np.ndarray, dict, dict]:
    """(adapter W, the gate's train query vectors, config record, metrics) from the pulled feedback records, their
    labels the one definition of used (`used`, params.yaml's section); it reads no log and asks no git (`main`
    stamps the log's hash and the commit). `TooLittleFeedback` when there is nothing to train on."""
    t0 = time.perf_counter()
    groups, changes = feedback_groups(records, used, val_fraction, p.calibration_fraction, p.ipw_clip)
    if not groups["train"]:
        raise TooLittleFeedback(
            f"train_ranker: no train query with a used candidate ({ {s: len(g) for s, g in groups.items()} })"
        )
    # a small log may leave a band empty: the fusion is then fitted on the train queries (said in the metrics)
    fusion_split = "calibration" if groups["calibration"] else "train"

    # 1. embed  2. adapter on train  3. fusion weights on calibration (cross-fitted: on every fold's held-out scores)
    embed_groups(groups, progress)
    # what the log's other questions like each one cited: one question left out, as the service reads it
    bank = Bank.from_records(records, get_embedder().encode)
    for g in (g for gs in groups.values() for g in gs):
        g["recalled"] = recalled_feature(bank.evidence(g["query"], g["q"], g["ids"], g["scope"]), p.recall_threshold)
    adapter_args = dict(l2=p.adapter_l2, steps=p.adapter_steps, lr=p.adapter_lr, temperature=p.temperature, seed=p.seed)

    def features_of(g: dict, w: np.ndarray) -> dict:
        floor = general_floor(g["query"], p.bm25_sd_floor, p.general_plain_floor, p.name_ramp, p.rare_ramp)
        return features(
            g["query"],
            g["q"],
            g["P"],
            g["texts"],
            w,
            bm25_sd_floor=p.bm25_sd_floor,
            general_bm25_floor=floor,
            recalled=g["recalled"],
        )

    pool, held_out = groups["train"] + groups["calibration"], None
    if p.cross_folds >= 2 and fusion_split == "calibration":  # None where the log is too small for two folds
        held_out = out_of_fold(pool, p.cross_folds, lambda gs: fit_adapter(gs, **adapter_args), features_of)
    if held_out is not None:
        fusion_split = "cross-fitted"
        weights = fit_weights(held_out, pool, p.fusion_l2, FITTED)
        weights["recalled"], recalled_grid = recalled_weight(held_out, pool, weights, p.k)
        w, gate_groups = fit_adapter(pool, **adapter_args), pool  # the served adapter learns from them all
    else:
        w, pool = fit_adapter(groups["train"], **adapter_args), groups["train"]
        gate_groups = groups[fusion_split]
        fitted = [features_of(g, w) for g in gate_groups]
        weights = fit_weights(fitted, gate_groups, p.fusion_l2, FITTED)
        weights["recalled"], recalled_grid = recalled_weight(fitted, gate_groups, weights, p.k)
    fv = [features_of(g, w) for g in groups["val"]]

    # 4. the domain gate, fitted on the in-domain queries the fusion saw (each one's own copy left out of its own)
    train_vecs = np.stack([g["q"] for g in pool]).astype(np.float32)
    gate_args = dict(k=p.domain_k, quantile=p.domain_quantile, ramp=p.domain_ramp)
    gate = fit_gate(train_vecs, gate_groups, gate_groups is pool, **gate_args)
    # what similar past questions cited speaks for the query wherever it has evidence (a past question at least
    # recall_threshold alike): the general weights read it as the fitted ones do, outside the domain too
    general = {name: 0.0 for name in FEATURES} | {"similarity": 1.0, "bm25": p.general_bm25}
    general["recalled"] = weights["recalled"]

    # 5. val, side by side
    val = groups["val"]
    shares = [domain_gate(domain_affinity(g["q"], train_vecs, gate["k"]), gate["lo"], gate["hi"]) for g in val]
    k = p.k
    # 6. a fit that learned noise (a few heavily weighed labels can turn a weight over) is not served: where the
    # fitted weights trail the general ones on the held-out queries (unbiased estimate) by more than the
    # tolerance, and surely (the paired 95 % interval below 0), the general weights serve in domain too
    fitted_q = ips_recalls(val, [gated_scores(f, weights, general, a) for f, a in zip(fv, shares)], k)
    general_q = ips_recalls(val, [gated_scores(f, weights, general, 0.0) for f in fv], k)
    fitted_ips, general_ips = (float(np.mean(x)) if x else 0.0 for x in (fitted_q, general_q))
    diff, _, diff_hi = paired_bootstrap(np.array(fitted_q), np.array(general_q), seed=p.seed) if val else (0, 0, 0)
    fallback = bool(val) and diff < -p.fallback_tolerance and diff_hi < 0
    if fallback:
        weights = dict(general)
    metrics = {
        **{f"{s}_queries": len(g) for s, g in groups.items()},
        "fusion_fitted_on": fusion_split,
        "adapter_queries": len(pool),  # train, and cross-fitted the calibration band too
        f"val_recall@{k}": round(
            mean_recall(val, [gated_scores(f, weights, general, a) for f, a in zip(fv, shares)], k), 4
        ),
        f"val_recall@{k}_fitted_fusion": round(mean_recall(val, [ranker_scores(f, weights) for f in fv], k), 4),
        f"val_recall@{k}_general_fusion": round(
            mean_recall(val, [gated_scores(f, weights, general, 0.0) for f in fv], k), 4
        ),
        f"val_recall@{k}_retrieval_order": round(mean_recall(val, [f["prior"] for f in fv], k), 4),
        f"val_recall@{k}_cosine": round(mean_recall(val, [f["similarity"] for f in fv], k), 4),
        f"val_recall@{k}_adapter_only": round(mean_recall(val, [f["adapted"] for f in fv], k), 4),
        f"val_recall@{k}_bm25": round(mean_recall(val, [f["bm25"] for f in fv], k), 4),
        # the unbiased (inverse-propensity) estimates beside the naive ones: labels come from what was shown
        f"val_recall@{k}_ips": round(general_ips if fallback else fitted_ips, 4),  # what is served
        f"val_recall@{k}_retrieval_order_ips": round(ips_recall(val, [f["prior"] for f in fv], k), 4),
        f"val_recall@{k}_cosine_ips": round(ips_recall(val, [f["similarity"] for f in fv], k), 4),
        "fusion_fallback": fallback,  # the fitted weights trailed the general ones on val: the general serve
        f"val_recall@{k}_ips_fitted": round(fitted_ips, 4),
        f"val_recall@{k}_ips_general": round(general_ips, 4),
        "val_ips_fitted_minus_general": [round(float(diff), 4), round(float(diff_hi), 4)],  # mean, CI high
        "adapter_norm": round(float(np.linalg.norm(w)), 4),
        **changes,  # labels the one definition of used changed: the answers' sentences, the -1 queries
        "val_gate_mean": round(float(np.mean(shares)), 4) if shares else None,  # the fitted weights' share
        "gate_lo": gate["lo"],
        "gate_hi": gate["hi"],
        **{f"weight_{n}": v for n, v in weights.items()},
        # the fusion's held-out Recall@k at each `recalled` weight tried ({} where no query had evidence)
        "recalled_weight_recall": recalled_grid,
        "queries_with_recalled": sum(bool(g["recalled"].any()) for gs in groups.values() for g in gs),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    record = {
        "input_format": RANKER_FORMAT,
        "base_model_name": "sentence-transformers/all-MiniLM-L6-v2",
        "val_fraction": val_fraction,
        **asdict(p),
        **{f"used.{k}": v for k, v in asdict(used).items()},  # the labels' definition it learned from
        "weights": weights,
        "general_weights": general,
        "domain_gate": gate,
    }
    return w, train_vecs, record, metrics


def train_on_log(
    p: RankerParams, val_fraction: float, used: UsedParams, progress=None
) -> tuple[np.ndarray, np.ndarray, dict, dict]:
    """`train` on the pull stage's log in `p.feedback`, the record stamped with the hash of the bytes read (the
    pull stage may rewrite the file) and the commit that trained it."""
    raw = (Path(p.feedback) / FEEDBACK_FILE).read_bytes()
    records = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    w, train_vecs, record, metrics = train(records, p, val_fraction, used, progress)
    record |= {"dataset_sha256": hashlib.sha256(raw).hexdigest(), "git_commit": git_commit()}
    return w, train_vecs, record, metrics


def log_run(record: dict, metrics: dict, adapter_path: Path) -> str:
    mlflow = use_mlflow()
    with mlflow.start_run(run_name="train_ranker") as run:
        mlflow.set_tags({"stage": "train_ranker", "input_format": record["input_format"]})
        mlflow.log_params({k: v for k, v in record.items() if v is not None and k != "weights"})
        mlflow.log_metrics({k.replace("@", "_at_"): v for k, v in metrics.items() if isinstance(v, (int, float))})
        mlflow.log_artifact(str(adapter_path))
        return run.info.run_id


def write(out: Path, w: np.ndarray, train_vecs: np.ndarray, record: dict, metrics: dict, track: bool = False) -> None:
    """The ranker folder: adapter, gate queries, metrics, and the config last (a folder without one is
    refused by serving); `track` logs an MLflow run first and records its id."""
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).unlink(missing_ok=True)
    np.save(out / ADAPTER_FILE, w)
    np.save(out / QUERIES_FILE, train_vecs)
    if track:
        record["mlflow_run_id"] = log_run(record, metrics, out / ADAPTER_FILE)
    write_atomic(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    write_atomic(out / CONFIG_FILE, json.dumps(record, indent=2) + "\n")


def fusion_of(m: dict) -> str:
    if m["fusion_fitted_on"] == "cross-fitted":
        return f"their held-out scores ({m['train_queries'] + m['calibration_queries']}, cross-fitted)"
    return f"{m[m['fusion_fitted_on'] + '_queries']} ({m['fusion_fitted_on']})"


def main(params: str = "params.yaml") -> None:
    p = load_section(params, "train_ranker", RankerParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction  # the build stage's split, exactly
    used = load_section(params, "used", UsedParams)
    console = Console(stderr=True)
    try:
        with make_progress(*Progress.get_default_columns(), console=console, transient=True) as bar:
            task = bar.add_task("train_ranker: embed feedback", total=None)
            w, vecs, record, m = train_on_log(
                p, val_fraction, used, lambda done, total: bar.update(task, completed=done, total=total)
            )
    except TooLittleFeedback as e:
        raise SystemExit(str(e)) from None
    write(Path(p.out), w, vecs, record, m, track=True)
    k = p.k
    console.print(
        f"train_ranker: adapter on {m['adapter_queries']} queries, fusion on {fusion_of(m)}; val Recall@{k} "
        f"{m[f'val_recall@{k}']:.4f} (retrieval order {m[f'val_recall@{k}_retrieval_order']:.4f}, cosine "
        f"{m[f'val_recall@{k}_cosine']:.4f}, adapter alone {m[f'val_recall@{k}_adapter_only']:.4f}, bm25 "
        f"{m[f'val_recall@{k}_bm25']:.4f}, fitted fusion {m[f'val_recall@{k}_fitted_fusion']:.4f}, general fusion "
        f"{m[f'val_recall@{k}_general_fusion']:.4f}) on {m['val_queries']} queries; unbiased (inverse-propensity) "
        f"{m[f'val_recall@{k}_ips']:.4f}, retrieval order {m[f'val_recall@{k}_retrieval_order_ips']:.4f}; "
        f"weights {record['weights']}"
        + (
            f" (the fitted ones trailed the general weights on val, {m[f'val_recall@{k}_ips_fitted']:.4f} vs "
            f"{m[f'val_recall@{k}_ips_general']:.4f}: the general weights serve)"
            if m["fusion_fallback"]
            else ""
        )
        + f"; domain gate {record['domain_gate']} (val share {m['val_gate_mean']}); {m['seconds']} s",
        soft_wrap=True,
    )


if __name__ == "__main__":
    main(*sys.argv[1:2])
