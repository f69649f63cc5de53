"""`pai lab teacher`: how good must a teacher be before its labels help? (issue 55, mechanism d, in the lab)

A teacher (the background LLM selector, reading all 20 candidates) would label what the consumer never saw. Here it
is simulated from SciFact's train qrels with a set recall R (a relevant candidate is picked with p R) and precision
P (irrelevant ones picked at the rate that makes P of its picks relevant, over the whole log). On one pulled log
(the demo's `data/feedback/feedback.jsonl`): every candidate the consumer left unlabelled gets the teacher's label
(picked: used; else ignored); the consumer's own labels stay. `train_ranker.train` (params.yaml's `train_ranker`,
`used`) trains one ranker per (P, R), and SciFact test and the other judged sets of `evaluate.benchmarks` score it
against general, paired 95 % CIs, beside the ranker trained on the log as it is.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from eval.consumer import ReplayParams
from eval.evaluate import EvaluateParams
from eval.items import bench_name, load_items
from eval.retrieval_eval import doc_ids, load_scifact
from eval.systems import run_systems
from retrieval.contracts.metrics import paired_bootstrap, per_query
from retrieval.embed import get_embedder
from retrieval.fusion import GeneralRule
from retrieval.params import ParamsError, SearchParams, UsedParams, load_section
from serving.ranker import RankerSelector
from training import train_ranker
from training.build import BuildParams
from training.train_ranker import RankerParams

from ..terminal import LAB_FEEDBACK, BenchDirOpt, JsonOpt, ParamsOpt, _fail, console, emit, judged_dir

app = typer.Typer()


def taught(
    records: list[dict], relevant: dict[str, set[str]], precision: float, recall: float, seed: int
) -> list[dict]:
    """The log with every unlabelled candidate labelled by a teacher of this precision and recall (by the qrels of
    each record's claim; a claim without qrels keeps its labels as they are)."""
    rel_n = irr_n = 0
    for r in records:
        rel = relevant.get(r["query"])
        if rel is None:
            continue
        for c in r["candidates"]:
            if c["used"] is None and c["source"]:
                hit = doc_ids([c["source"]])[0] in rel
                rel_n, irr_n = rel_n + hit, irr_n + (not hit)
    false_rate = min(1.0, recall * rel_n * (1 - precision) / (precision * irr_n)) if irr_n and precision else 0.0
    rng, out = random.Random(seed), []
    for r in records:
        rel = relevant.get(r["query"])
        if rel is None:
            out.append(r)
            continue
        cands = []
        for c in r["candidates"]:
            if c["used"] is None and c["source"]:
                hit = doc_ids([c["source"]])[0] in rel
                c = {**c, "used": rng.random() < (recall if hit else false_rate)}
            cands.append(c)
        out.append({**r, "candidates": cands})
    return out


def run_teacher(params: Path, benchmark_dir: Path, log_file: Path, grid: list[tuple[float, float]], seed: int) -> dict:
    records = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    relevant = {text: docs for _, text, docs in load_scifact(benchmark_dir, "train")}
    rp, used = load_section(params, "train_ranker", RankerParams), load_section(params, "used", UsedParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    rule = GeneralRule.of(load_section(params, "search", SearchParams))
    benches = [b for b in load_section(params, "evaluate", EvaluateParams).benchmarks.split(",") if Path(b).exists()]
    sets = {bench_name(b): [it for it in load_items(Path(b), 0) if it.get("relevant_ids")] for b in benches}
    embedder = get_embedder()
    rows = []
    tmp = tempfile.TemporaryDirectory()
    for precision, recall in [(None, None), *grid]:
        log = records if precision is None else taught(records, relevant, precision, recall, seed)
        w, vecs, record, m = train_ranker.train(log, rp, val_fraction, used)
        folder = Path(tmp.name) / f"ranker-{len(rows)}"
        train_ranker.write(folder, w, vecs, record, m)
        ranker = RankerSelector(folder, "teacher")
        row = {"precision": precision, "recall": recall}
        for name, items in sets.items():
            rel = {it["qid"]: set(it["relevant_ids"]) for it in items}
            got = run_systems(items, embedder, 5, others={"ranker": ranker}, rule=rule)
            v, g = (per_query(rel, {q: got[s][q].ids for q in rel})["recall@5"] for s in ("ranker", "general"))
            d, lo, hi = paired_bootstrap(v, g, seed=seed)
            row[name] = {"ranker": round(float(v.mean()), 4), "vs_general": [round(d, 4), round(lo, 4), round(hi, 4)]}
        rows.append(row)
        console.print(
            f"teacher P {precision} R {recall}: "
            + ", ".join(f"{k} {v['vs_general']}" for k, v in row.items() if isinstance(v, dict)),
            soft_wrap=True,
        )
    tmp.cleanup()
    return {"log": str(log_file), "queries": len(records), "seed": seed, "rows": rows}


@app.command("teacher", rich_help_panel=LAB_FEEDBACK, short_help="How good a teacher of all 20 must be to help.")
def teacher(
    log: Annotated[Path, typer.Option(help="a pulled feedback log (the demo's)")] = Path(
        "data/feedback/feedback.jsonl"
    ),
    grid: Annotated[
        str, typer.Option(help="precision:recall pairs, comma-separated")
    ] = "0.9:0.9,0.7:0.7,0.5:0.8,0.9:0.3",
    seed: Annotated[Optional[int], typer.Option(help="the teacher's draws (default: replay.seed)")] = None,
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
) -> None:
    """Label what the consumer never saw with a simulated teacher of set precision and recall, retrain, and score
    each ranker against general on the judged sets."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    try:
        pairs = [tuple(float(x) for x in g.split(":")) for g in grid.split(",") if g]
        if not pairs or any(len(p) != 2 or not (0 < p[0] <= 1 and 0 <= p[1] <= 1) for p in pairs):
            raise ValueError
    except ValueError:
        _fail(f"--grid: precision:recall pairs in (0, 1], comma-separated, not {grid!r}")
    if not log.exists():
        _fail(f"{log}: no pulled log (run `pai lab cycle` first)")
    try:
        seed = load_section(params, "replay", ReplayParams).seed if seed is None else seed
        result = run_teacher(params, benchmark_dir, log, pairs, seed)
    except (ParamsError, FileNotFoundError, ValueError) as e:
        _fail(str(e))
    t = Table(title=f"a teacher of all 20 on {result['queries']} queries: ranker − general, Recall@5 [95 % CI]")
    names = [k for k in result["rows"][0] if k not in ("precision", "recall")]
    for col in ("teacher (P, R)", *names):
        t.add_column(col, justify="right")
    for r in result["rows"]:
        who = "none (the log)" if r["precision"] is None else f"{r['precision']:g}, {r['recall']:g}"
        t.add_row(
            who,
            *(
                f"{r[n]['vs_general'][0]:+.3f} [{r[n]['vs_general'][1]:+.3f}, {r[n]['vs_general'][2]:+.3f}]"
                for n in names
            ),
        )
    emit(result, as_json, None, t)
