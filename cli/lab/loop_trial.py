"""`pai lab loop trial`: on-policy cycles on several domains, the trial by interleaving the only judge of a
promotion, the judged test split scoring each decision afterwards (eval/bench/loop_trial.py). This module
loads the domains, embeds their candidates once (through the vector cache), and gives the loop the real
`train_ranker.train` as its retrain step: the log's records in memory, the ranker served as
the service serves it (`serving.ranker.RankerSelector`, on the vectors computed here)."""

from __future__ import annotations

import json
import sysconfig
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.table import Table

from eval.bench import loop_trial
from eval.bench.trial_power import MERGES, Consumer, scifact_items
from eval.code_bench import build as build_code_items
from eval.consumer import ReplayParams
from eval.evaluate import EvaluateParams
from eval.items import checked_items
from eval.systems import bm25_ranking, passage_texts, prefill_vectors
from retrieval.contracts.interleaving import TrialParams
from retrieval.contracts.passage import passage_text
from retrieval.contracts.recalled import Bank
from retrieval.contracts.selection import PromptCandidate
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.fusion import GeneralRule, general_order
from retrieval.params import ParamsError, SearchParams, UsedParams, load_section
from retrieval.query.order import rrf
from serving.ranker import RankerSelector
from training import train_ranker
from training.build import BuildParams
from training.train_ranker import RankerParams

from ..terminal import BenchDirOpt, JsonOpt, ParamsOpt, _fail, console, emit, judged_dir

app = typer.Typer()  # `pai lab loop trial`

DOMAINS = ("scifact", "hotpotqa", "code")


def domain_items(name: str, benchmark_dir: Path, embedder, code_queries: int, cache: Path | None = None) -> list[dict]:
    """Every judged item of a domain: SciFact's train and test claims, HotpotQA's three samples, the code set.
    With `cache`, the items built once (SciFact's and the code set's candidates are mined over a whole corpus, the
    slow part) are written to `cache/NAME.jsonl` and read from there after."""
    saved = cache / (f"code-{code_queries}.jsonl" if name == "code" else f"{name}.jsonl") if cache else None
    if saved and saved.is_file():
        items = checked_items(saved)
    else:
        items = built(name, benchmark_dir, embedder, code_queries)
    if saved and not saved.is_file():
        saved.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(saved, "".join(json.dumps(it) + "\n" for it in items))
    return [{**it, "qid": str(it["qid"]), "domain": name} for it in items if it.get("relevant_ids")]


def built(name: str, benchmark_dir: Path, embedder, code_queries: int) -> list[dict]:
    if name == "scifact":
        items = [*scifact_items(benchmark_dir, embedder, "train"), *scifact_items(benchmark_dir, embedder, "test")]
    elif name == "hotpotqa":
        items = [
            it for s in ("train", "dev", "test") for it in checked_items(benchmark_dir / "hotpotqa" / f"{s}.jsonl")
        ]
    elif name == "code":
        items = build_code_items(Path(sysconfig.get_paths()["purelib"]), embedder, code_queries)
    else:
        raise ValueError(f"domain {name!r}: one of {', '.join(DOMAINS)}")
    return items


def embed(items: list[dict], embedder) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """qid -> (query vector, candidate vectors), the passages through the vector cache (filled first in full
    batches of similar length)."""
    prefill_vectors(embedder, passage_texts(items))
    qs = embedder.encode([it["query"] for it in items])
    return {
        it["qid"]: (
            q,
            embedder.encode_passages(
                [passage_text(c.get("title"), c["text"], c.get("parent_heading")) for c in it["candidates"]]
            ),
        )
        for it, q in zip(items, qs)
    }


def first_stage(items: list[dict], vectors: dict, search: SearchParams) -> loop_trial.Orders:
    """The first stage's order over each query's candidates, as `retrieval.query.order.fused_order` gives it: with
    `search.fusion: general` the general order (`retrieval.fusion`: cosine, and BM25 as far as its evidence goes);
    with `rrf`, cosine and BM25 by reciprocal rank."""
    out = {}
    for it in items:
        q, P = vectors[it["qid"]]
        ids = [c["id"] for c in it["candidates"]]
        if search.fusion == "general" and search.hybrid:
            # the texts as the ranker reads them, as `pai lab bench general` replays the first stage (eval/bench/day_one)
            texts = [passage_text(c.get("title"), c["text"], c.get("parent_heading")) for c in it["candidates"]]
            out[it["qid"]] = [ids[i] for i in general_order(it["query"], P @ q, texts, GeneralRule.of(search))]
        else:
            cos = [ids[i] for i in np.argsort(-(P @ q), kind="stable")]
            out[it["qid"]] = rrf([cos, bm25_ranking(it)], search.rrf_k)
    return out


def trainer(params: Path, vectors: dict, folder: Path):
    """records -> a ranker (items -> orders): the real `train_ranker.train` on the log's records, served as the
    service does."""
    rp = load_section(params, "train_ranker", RankerParams)
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    used = load_section(params, "used", UsedParams)
    count = [0]

    def train(records: list[dict]) -> loop_trial.Ranker:
        count[0] += 1
        out = folder / f"ranker{count[0]}"
        w, vecs, record, m = train_ranker.train(records, rp, val_fraction, used)
        train_ranker.write(out, w, vecs, record, m)
        selector = RankerSelector(out, f"lab:{count[0]}")
        # what the log's questions like each item cited, as the log stood at this retrain (the service reads its
        # log as it grows; the lab's served orders are fixed per retrain)
        bank = Bank.from_records(records, get_embedder().encode) if selector.weights["recalled"] else None

        def orders(items: list[dict]) -> loop_trial.Orders:
            ranked = {}
            for it in items:
                q, P = vectors[it["qid"]]
                ids = [str(loop_trial.lab_chunk_id(c["id"])) for c in it["candidates"]]
                recalled = bank.evidence(it["query"], q, ids) if bank else [() for _ in ids]
                cands = [
                    PromptCandidate(c["id"], c.get("title"), c["text"], c.get("parent_heading"), vector=v, recalled=r)
                    for c, v, r in zip(it["candidates"], P, recalled)
                ]
                s = selector.scores(it["query"], cands, q)
                ranked[it["qid"]] = [it["candidates"][i]["id"] for i in sorted(range(len(s)), key=lambda i: (-s[i], i))]
            return ranked

        return orders

    return train


@app.command("trial", short_help="On-policy cycles per domain, the trial the only judge.")
def command(
    domain: Annotated[str, typer.Option(help="scifact, hotpotqa, code, comma-separated")] = "scifact,hotpotqa,code",
    cycles: Annotated[int, typer.Option(help="on-policy cycles per seed")] = 3,
    seeds: Annotated[int, typer.Option(help="independent runs (seeds 0..N-1)")] = 2,
    test_fraction: Annotated[float, typer.Option(help="share of each domain's items held out as the judge")] = 0.3,
    code_queries: Annotated[int, typer.Option(help="items of the code domain")] = 600,
    items_cache: Annotated[
        Optional[Path], typer.Option(help="keep each domain's built items here (NAME.jsonl) and reuse them")
    ] = None,
    max_queries: Annotated[int, typer.Option(help="items per domain (0 = all)")] = 0,
    merge: Annotated[
        str,
        typer.Option(
            help="trial merges, comma-separated (agreed-first as served, team-draft as served before, union); the first"
            " decides"
        ),
    ] = "agreed-first",
    benchmark_dir: BenchDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: Annotated[
        Optional[Path],
        typer.Option(
            help="the report (JSON; a CSV of the rows beside it); default: loop_trial.json in params.yaml evaluate.out"
        ),
    ] = None,
) -> None:
    """On-policy cycles per domain: serve, retrain, and promote only when the trial by interleaving says so; the
    judged test split scores each decision, truly worse challengers (labels turned over, another domain's log)
    on trial too (eval/bench/loop_trial.py)."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    names = [d for d in domain.split(",") if d]
    if not names or any(d not in DOMAINS for d in names) or cycles < 1 or seeds < 1 or not 0 < test_fraction < 1:
        _fail(f"--domain among {', '.join(DOMAINS)}; --cycles, --seeds >= 1; --test-fraction in (0, 1)")
    try:
        rule = load_section(params, "trial", TrialParams)
        search = load_section(params, "search", SearchParams)
        cp = load_section(params, "replay", ReplayParams)
        # the lab's consumer of the trial's rule (p 0.8 / 0.05), reading the previews as replay's consumer does
        consumer = Consumer.realistic(search.previews, cp.previews_read, cp.expand_relevant, cp.expand_irrelevant)
        out = Path(load_section(params, "evaluate", EvaluateParams).out) / "loop_trial.json" if out is None else out
        merges = list(dict.fromkeys(m for m in merge.split(",") if m))
        if not merges or any(m not in MERGES for m in merges):
            raise ParamsError(f"--merge: one or more of {', '.join(MERGES)}, comma-separated")
    except ParamsError as e:
        _fail(str(e))
    embedder, items, vectors, first = get_embedder(), {}, {}, {}
    for d in names:
        console.print(f"loop trial: {d}: loading and embedding the judged items (vector cache)")
        items[d] = domain_items(d, benchmark_dir, embedder, code_queries, items_cache)
        items[d] = items[d][:max_queries] if max_queries else items[d]
        vectors.update(embed(items[d], embedder))
        first[d] = first_stage(items[d], vectors, search)
    meta = {"rule": asdict(rule), "consumer": asdict(consumer), "explore_rate": search.explore_rate}
    meta |= {"first_stage": search.fusion, "seeds": list(range(seeds)), "cycles": cycles}
    meta |= {"test_fraction": test_fraction, "merges": merges}

    def save(report: dict) -> dict:  # after each seed, and at the end
        result = {**meta, **report}
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(out, json.dumps(result, indent=2) + "\n")
            write_atomic(out.with_suffix(".csv"), csv_rows(result["rows"]))
        return result

    with tempfile.TemporaryDirectory() as tmp:
        result = loop_trial.run(
            items,
            first,
            trainer(params, vectors, Path(tmp)),
            rule,
            consumer,
            cycles,
            list(range(seeds)),
            test_fraction=test_fraction,
            explore_rate=search.explore_rate,
            log=lambda line: console.print(f"loop trial: {line}", soft_wrap=True),
            merges=merges,
            done=save,
        )
    result = {**meta, **result}
    emit(result, as_json, None, lambda c: show(c, result))


CSV_COLUMNS = ("seed", "domain", "cycle", "champion", "kind", "merge", "gain", "decision", "judged", "queries", "cost")


def csv_rows(rows: list[dict]) -> str:
    return ",".join(CSV_COLUMNS) + "\n" + "".join(",".join(str(r[c]) for c in CSV_COLUMNS) + "\n" for r in rows)


def show(c, result: dict) -> None:
    t = Table(title="on-policy trials: the judged test split scores each decision")
    for col in (
        "seed",
        "domain",
        "cycle",
        "champion",
        "challenger",
        "merge",
        "judged gain [95% CI]",
        "decision",
        "cited",
        "cost",
    ):
        t.add_column(col, justify="right")
    for r in result["rows"]:
        t.add_row(
            str(r["seed"]),
            r["domain"],
            str(r["cycle"]),
            r["champion"],
            r["challenger"],
            r["merge"],
            f"{r['gain']:+.4f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}]",
            r["decision"],
            str(r["judged"]),
            f"{r['cost']:+.4f}",
        )
    c.print(t)
    for d, s in result["summary"].items():
        c.print(
            f"{d}: {s['better_by_0.05']} trials judged better by >= 0.05, promoted {s['better_promoted']} "
            f"({s['better_promoted_within_max_judged']} within max_judged); {s['worse_by_0.01']} judged worse by "
            f">= 0.01, promoted {s['wrong_promotions']}; cost max {s['max_cost']:+.4f} mean {s['mean_cost']:+.4f}",
            soft_wrap=True,
        )
