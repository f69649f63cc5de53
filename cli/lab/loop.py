"""`pai lab loop report`: does the loop learn? The SciFact train feedback in the log, taken in
chronological slices (cycle i trains on slices 1..i, as if the replay had stopped there), retrains the
learned ranker (`train_ranker`) after each slice and measures held-out Recall@5 with 95 % CIs on the evaluate
benchmarks (HotpotQA test, SciFact test with our own retrieval's candidates, the feedback log's val
split — the same queries for every cycle), beside the baselines. Each cycle is also compared with
the one before, and the last with the first, by a paired bootstrap. Writes metrics/loop.json, metrics/loop_recall.csv (`dvc plots`)
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

from eval.evaluate import EvaluateParams
from eval.items import bench_name, feedback_items, load_items
from eval.systems import BASELINES, run_systems
from retrieval.contracts.metrics import mean_ci, paired_bootstrap, per_query
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.params import UsedParams, load_section
from retrieval.tracking import use_mlflow
from serving.ranker import RankerSelector
from training import train_ranker
from training.build import BuildParams
from training.train_ranker import RankerParams


def scifact_records(feedback_file: Path) -> list[dict]:
    """The log's SciFact queries (their candidates come from the SciFact corpus), oldest first."""
    out = []
    for line in open(feedback_file, encoding="utf-8"):
        rec = json.loads(line)
        if any("scifact/" in (c.get("source") or "") for c in rec["candidates"]):
            out.append(rec)
    return sorted(out, key=lambda r: r["query_id"])


def run_loop(params: Path, slices: int, max_queries: int, log: Callable[[str], None] = print) -> dict:
    """`max_queries` per held-out benchmark, 0 = all."""
    ep = replace(load_section(params, "evaluate", EvaluateParams), max_queries=max_queries)
    rp = load_section(params, "train_ranker", RankerParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    used = load_section(params, "used", UsedParams)
    records = scifact_records(Path(rp.feedback) / "feedback.jsonl")
    if len(records) < slices:
        raise ValueError(
            f"{len(records)} SciFact queries in the feedback log: run `pai lab simulate --dataset scifact` first"
        )
    benches = {bench_name(b): load_items(Path(b), ep.max_queries) for b in ep.benchmarks.split(",") if b}
    benches["feedback/val"] = feedback_items(Path(ep.feedback), val_fraction, ep.max_queries, used=used)
    benches = {name: items for name, items in benches.items() if items}
    embedder = get_embedder()
    relevant = {name: {it["qid"]: set(it["relevant_ids"]) for it in items} for name, items in benches.items()}

    def recalls(name: str, picks: dict) -> np.ndarray:
        return per_query(relevant[name], {q: picks[q].ids for q in relevant[name]})["recall@5"]

    log(
        f"loop: {len(records)} SciFact queries in {slices} slices; held out: "
        + ", ".join(f"{n} ({len(i)})" for n, i in benches.items())
    )
    base = {name: run_systems(items, embedder, 5) for name, items in benches.items()}
    rows, previous, first = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for cycle in range(1, slices + 1):
            seen = records[: len(records) * cycle // slices]
            w, vecs, record, m = train_ranker.train(seen, rp, val_fraction, used)
            train_ranker.write(Path(tmp) / f"cycle{cycle}", w, vecs, record, m)
            selector = RankerSelector(Path(tmp) / f"cycle{cycle}", f"ranker:cycle{cycle}")
            log(f"loop: cycle {cycle}: trained on {len(seen)} queries ({m['train_queries']} train, {m['seconds']} s)")
            for name, items in benches.items():
                picks = run_systems(items, embedder, 5, others={"ranker": selector})
                values = {s: recalls(name, base[name][s]) for s in BASELINES} | {
                    "ranker": recalls(name, picks["ranker"])
                }
                for system, v in values.items():
                    mean, lo, hi = mean_ci(v, seed=cycle)
                    row = {
                        "cycle": cycle,
                        "queries_seen": len(seen),
                        "benchmark": name,
                        "system": system,
                        "recall@5": round(mean, 4),
                        "ci95_low": round(lo, 4),
                        "ci95_high": round(hi, 4),
                    }
                    if system == "ranker" and name in previous:
                        d, dlo, dhi = paired_bootstrap(v, previous[name], seed=cycle)
                        row["vs_previous"] = {
                            "diff": round(d, 4),
                            "ci95_low": round(dlo, 4),
                            "ci95_high": round(dhi, 4),
                        }
                        d, dlo, dhi = paired_bootstrap(v, first[name], seed=cycle)
                        row["vs_first"] = {"diff": round(d, 4), "ci95_low": round(dlo, 4), "ci95_high": round(dhi, 4)}
                    rows.append(row)
                previous[name] = values["ranker"]
                first.setdefault(name, values["ranker"])
    worse = [r for r in rows if r.get("vs_previous") and r["vs_previous"]["ci95_high"] < 0]
    last = {r["benchmark"]: r["vs_first"] for r in rows if r.get("vs_first") and r["cycle"] == slices}
    return {
        "slices": slices,
        "queries": len(records),
        "selector": "ranker",
        "rows": rows,
        "no_cycle_worse_than_the_previous": not worse,
        "worse": worse,
        "last_vs_first": last,
    }


def write_outputs(result: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "loop.json", json.dumps(result, indent=2) + "\n")
    write_atomic(
        out_dir / "loop_recall.csv",
        "cycle,benchmark,system,recall,ci95_low,ci95_high\n"
        + "".join(
            f"{r['cycle']},{r['benchmark']},{r['system']},{r['recall@5']},{r['ci95_low']},{r['ci95_high']}\n"
            for r in result["rows"]
        ),
    )
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
        t.add_row(
            str(r["cycle"]),
            str(r["queries_seen"]),
            r["benchmark"],
            r["system"],
            f"{r['recall@5']:.4f}",
            f"[{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]",
            f"{vp['diff']:+.4f} [{vp['ci95_low']:+.3f}, {vp['ci95_high']:+.3f}]" if vp else "",
        )
    console.print(t)
    console.print(
        "no cycle worse than the one before (paired 95% CI): "
        + ("yes" if result["no_cycle_worse_than_the_previous"] else "NO")
    )
    for name, v in result.get("last_vs_first", {}).items():
        console.print(f"last cycle vs first, {name}: {v['diff']:+.4f} [{v['ci95_low']:+.4f}, {v['ci95_high']:+.4f}]")
