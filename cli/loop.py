"""`pai loop report`: does the loop learn? The SciFact train feedback in the log, taken in
chronological slices (cycle i trains on slices 1..i, as if the replay had stopped there), retrains the
cross-encoder after each slice and measures held-out Recall@5 with 95 % CIs on the evaluate
benchmarks (HotpotQA test, SciFact test with our own retrieval's candidates, the feedback log's val
split — the same queries for every cycle), beside the baselines. Each cycle is also compared with
the one before by a paired bootstrap. Writes metrics/loop.json, metrics/loop_recall.csv (`dvc plots`)
and an MLflow run with the curves (step = cycle).

The LLM kind is not in the report yet: on CPU the tiny model cannot learn the task (its Recall@5 is 0
in `dvc repro`), and each of its cycles would cost ~10 minutes; adding it is a GPU-box follow-up.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.table import Table

from eval.evaluate import BASELINES, EvaluateParams, bench_name, feedback_items, load_items, run_systems
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.metrics import mean_ci, paired_bootstrap, per_query
from retrieval.params import load_section
from retrieval.tracking import use_mlflow
from serving.cross_encoder import CrossEncoderSelector
from training.build import BuildParams
from training.train_ce import CrossEncoderParams
from training.train_ce import train as train_ce


def scifact_records(feedback_file: Path) -> list[dict]:
    """The log's SciFact queries (their candidates come from the SciFact corpus), oldest first."""
    out = []
    for line in open(feedback_file, encoding="utf-8"):
        rec = json.loads(line)
        if any("scifact/" in (c.get("source") or "") for c in rec["candidates"]):
            out.append(rec)
    return sorted(out, key=lambda r: r["query_id"])


def run_loop(params: Path, slices: int, max_queries: int, log: Callable[[str], None] = print, max_train_pairs: int | None = None) -> dict:
    """`max_train_pairs` None = params' cap. A fixed cap below a slice's pairs trains every cycle on as many
    pairs, so the report measures fresher data rather than more of it: 0 (all) measures the loop."""
    ep = replace(load_section(params, "evaluate", EvaluateParams), max_queries=max_queries)
    ce = load_section(params, "train_ce", CrossEncoderParams)
    if max_train_pairs is not None:
        ce = replace(ce, max_train_pairs=max_train_pairs)
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    records = scifact_records(Path(ce.feedback) / "feedback.jsonl")
    if len(records) < slices:
        raise ValueError(f"{len(records)} SciFact queries in the feedback log: run `pai simulate --benchmark scifact` first")
    benches = {bench_name(b): load_items(Path(b), ep.max_queries) for b in ep.benchmarks.split(",") if b}
    benches["feedback/val"] = feedback_items(Path(ep.feedback), ep.val_fraction, ep.max_queries)
    benches = {name: items for name, items in benches.items() if items}
    embedder = get_embedder()
    relevant = {name: {it["qid"]: set(it["relevant_ids"]) for it in items} for name, items in benches.items()}

    def recalls(name: str, picks: dict) -> np.ndarray:
        return per_query(relevant[name], {q: picks[q].ids for q in relevant[name]})["recall@5"]

    log(f"loop: {len(records)} SciFact queries in {slices} slices; held out: "
        + ", ".join(f"{n} ({len(i)})" for n, i in benches.items()))  # fmt: skip
    base = {name: run_systems(items, embedder, 5) for name, items in benches.items()}
    rows, previous = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for cycle in range(1, slices + 1):
            seen = records[: len(records) * cycle // slices]
            folder = Path(tmp) / f"cycle{cycle}"
            folder.mkdir()
            (folder / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in seen))
            m = train_ce(replace(ce, feedback=str(folder), out=str(folder / "ce")), val_fraction)
            selector = CrossEncoderSelector(folder / "ce", f"ce:cycle{cycle}")
            log(f"loop: cycle {cycle}: trained on {len(seen)} queries ({m['train_pairs_used']} pairs, {m['train_seconds']} s)")
            for name, items in benches.items():
                picks = run_systems(items, embedder, 5, others={"cross_encoder": selector})
                values = {s: recalls(name, base[name][s]) for s in BASELINES} | {"cross_encoder": recalls(name, picks["cross_encoder"])}
                for system, v in values.items():
                    mean, lo, hi = mean_ci(v, seed=cycle)
                    row = {"cycle": cycle, "queries_seen": len(seen), "benchmark": name, "system": system,
                           "recall@5": round(mean, 4), "ci95_low": round(lo, 4), "ci95_high": round(hi, 4)}  # fmt: skip
                    if system == "cross_encoder" and name in previous:
                        d, dlo, dhi = paired_bootstrap(v, previous[name], seed=cycle)
                        row["vs_previous"] = {"diff": round(d, 4), "ci95_low": round(dlo, 4), "ci95_high": round(dhi, 4)}
                    rows.append(row)
                previous[name] = values["cross_encoder"]
    worse = [r for r in rows if r.get("vs_previous") and r["vs_previous"]["ci95_high"] < 0]
    return {"slices": slices, "queries": len(records), "max_train_pairs": ce.max_train_pairs, "rows": rows,
            "no_cycle_worse_than_the_previous": not worse, "worse": worse}  # fmt: skip


def write_outputs(result: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "loop.json", json.dumps(result, indent=2) + "\n")
    write_atomic(out_dir / "loop_recall.csv", "cycle,benchmark,system,recall,ci95_low,ci95_high\n" + "".join(
        f"{r['cycle']},{r['benchmark']},{r['system']},{r['recall@5']},{r['ci95_low']},{r['ci95_high']}\n" for r in result["rows"]))  # fmt: skip
    mlflow = use_mlflow()
    with mlflow.start_run(run_name="loop-report"):
        mlflow.set_tags({"stage": "loop-report"})
        mlflow.log_params({"slices": result["slices"], "queries": result["queries"]})
        for r in result["rows"]:
            mlflow.log_metric(f"{r['benchmark']}/{r['system']}/recall_at_5", r["recall@5"], step=r["cycle"])


def print_loop(result: dict, console) -> None:
    t = Table(title=f"learning loop: held-out Recall@5 [95% CI] after each of {result['slices']} slices")
    for col in ("cycle", "queries seen", "benchmark", "system", "recall@5", "95% CI", "vs previous cycle"):
        t.add_column(col, justify="right" if col not in ("benchmark", "system") else "left")
    for r in result["rows"]:
        vp = r.get("vs_previous")
        t.add_row(str(r["cycle"]), str(r["queries_seen"]), r["benchmark"], r["system"], f"{r['recall@5']:.4f}",
                  f"[{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]",
                  f"{vp['diff']:+.4f} [{vp['ci95_low']:+.3f}, {vp['ci95_high']:+.3f}]" if vp else "")  # fmt: skip
    console.print(t)
    console.print("no cycle worse than the one before (paired 95% CI): " + ("yes" if result["no_cycle_worse_than_the_previous"] else "NO"))
