"""`pai lab loop report --consumer realistic|oracle`: the loop as it runs in use, on-policy.

Each cycle serves a slice of the SciFact train claims through the real service with the current
champion answering inline (cycle 1: the first-stage order, a fresh install's), a consumer posting
feedback on what it was given (`replay.consumer`: the realistic one cites `[n]` within its context only,
missing some and citing an irrelevant one at times; the oracle judges all 20 candidates, the bound), then
retrains the learned ranker on everything logged so far and makes it the champion that serves the next
slice. So each champion decides what the next one may learn from: the exposure bias the log's exposure
fields, exploration (`search.explore_rate`) and inverse-propensity weights (`train_ranker.ipw_clip`)
are there to correct.

Per cycle: held-out SciFact test Recall@5 of the new champion with a paired 95 % CI against hybrid (the
best baseline there); the Recall of what was *served* during that cycle's replay (what users got,
exploration included) and what the context would have held without exploration (its cost); the
champion's in-domain val Recall@5, naive and inverse-propensity weighted, beside the retrieval order's.
The loop serves, logs and pulls in a scratch log of its own (`retrieval.logs.scratch`), its staging files in a
temporary folder: the user's feedback log, learned answers and staging are never touched, a pull or a live
service beside it sees none of its traffic, and nothing of the user's is deleted when it ends.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml
from rich.table import Table

from eval.consumer import ReplayParams
from eval.evaluate import EvaluateParams
from eval.items import against_general, bench_name, load_items, log_bank, with_recalled
from eval.systems import run_systems
from retrieval.contracts.metrics import mean_ci, paired_bootstrap, per_query
from retrieval.db import connect
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.fusion import GeneralRule
from retrieval.logs.scratch import scratch_log
from retrieval.params import SearchParams, UsedParams, load_section
from serving.ranker import RankerSelector
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer, build_service
from training import train_ranker
from training.build import BuildParams
from training.pull import PullParams, pull
from training.train_ranker import RankerParams

from .replay import load_queries, replay


def loop_params(params: Path, folder: Path, consumer: str, explore_rate: float | None) -> Path:
    """params.yaml with the loop's consumer and exploration switched as asked."""
    raw = yaml.safe_load(params.read_text())
    raw.setdefault("replay", {})["consumer"] = consumer
    if explore_rate is not None:
        raw["search"]["explore_rate"] = explore_rate
    out = folder / "params.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def run_on_policy(
    params: Path,
    benchmark_dir: Path,
    consumer: str,
    cycles: int,
    explore_rate: float | None = None,
    max_queries: int = 0,
    log: Callable[[str], None] = print,
) -> dict:
    """`cycles` on-policy cycles over the SciFact train claims; `max_queries` held-out SciFact test claims (0 = all)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lp = loop_params(params, tmp, consumer, explore_rate)
        rp, cp = load_section(lp, "train_ranker", RankerParams), load_section(lp, "replay", ReplayParams)
        val_fraction = load_section(lp, "build", BuildParams).val_fraction
        used = load_section(lp, "used", UsedParams)
        ep = load_section(lp, "evaluate", EvaluateParams)
        tests = [b for b in ep.benchmarks.split(",") if "scifact" in b]
        if not tests or not Path(tests[0]).exists():
            raise FileNotFoundError(
                f"no SciFact test benchmark among evaluate.benchmarks (run `pai lab cycle` first): {tests}"
            )
        items = [it for it in load_items(Path(tests[0]), max_queries) if it.get("relevant_ids")]
        claims = load_queries(benchmark_dir, "scifact", "train")
        embedder = get_embedder()
        with connect() as conn:
            (scifact,) = conn.execute("SELECT count(*) FROM chunks WHERE source LIKE %s", ("%scifact%",)).fetchone()
        if not scifact:
            raise FileNotFoundError(
                "the store holds no SciFact chunks: run `pai lab cycle` (or `pai ingest` the corpus) first"
            )
        relevant = {it["qid"]: set(it["relevant_ids"]) for it in items}

        def recalls(picks: dict) -> np.ndarray:
            return per_query(relevant, {q: picks[q].ids for q in relevant})["recall@5"]

        search = load_section(lp, "search", SearchParams)
        rule = GeneralRule.of(search)  # the general baseline as evaluate orders it: the first stage's own order
        base = run_systems(items, embedder, 5, rule=rule)
        hybrid, general = recalls(base["hybrid"]), recalls(base["general"])
        log(
            f"loop: {consumer} consumer, {cycles} on-policy cycles over {len(claims)} SciFact train claims, explore_rate "
            f"{search.explore_rate}, ipw_clip {rp.ipw_clip}; held out: {bench_name(tests[0])} ({len(items)}), "
            f"hybrid {hybrid.mean():.4f}, general {general.mean():.4f}"
        )
        champion, rows, previous = FirstStageSelector(), [], None
        # the loop's traffic in a scratch log of its own: the user's log, learned answers and pulls never see it
        with scratch_log() as lab_url:
            for cycle in range(1, cycles + 1):
                part = claims[len(claims) * (cycle - 1) // cycles : len(claims) * cycle // cycles]
                # exploration seeded from the consumer's seed and the cycle: a run repeats, given replay.seed
                service = build_service(
                    lp, champion, staging_dir=tmp / "staging", explore_seed=cp.seed * 1000 + cycle, db_url=lab_url
                )
                with BackgroundServer(service) as srv:
                    served = replay(srv.url, part, consumer=replace(cp, seed=cp.seed + cycle)).as_dict()
                folder = tmp / f"cycle{cycle}"
                logged = pull(PullParams(out=str(folder), lag_seconds=0.0), url=lab_url)["queries"]
                w, vecs, record, m = train_ranker.train_on_log(replace(rp, feedback=str(folder)), val_fraction, used)
                train_ranker.write(folder / "ranker", w, vecs, record, m)
                new = RankerSelector(folder / "ranker", f"ranker:cycle{cycle}")
                bank = log_bank(folder, embedder.encode)  # what the log's questions like each claim cited
                with_recalled(items, bank, embedder.encode)
                v = recalls(run_systems(items, embedder, 5, others={"ranker": new}, rule=rule)["ranker"])
                mean, lo, hi = mean_ci(v, seed=cycle)
                d, dlo, dhi = paired_bootstrap(v, hybrid, seed=cycle)
                row = {
                    "cycle": cycle,
                    "served_by": champion.version,
                    "queries_served": served["queries"],
                    "served_recall": served["served_recall"],
                    "served_recall_without_exploration": served["served_recall_without_exploration"],
                    "explored_queries": served["explored"],
                    "previews": {k: served[k] for k in ("previews", "expanded", "expanded_relevant")},
                    "preview_token_share": served["preview_token_share"],
                    "labels": {"used": served["used"], "ignored": served["ignored"]},
                    # labels the one definition of used changed (params.yaml `used`)
                    "relabelled": {x: m[x] for x in ("uncited_quotes_used", "thumbs_down_voided")},
                    "logged_queries": logged,
                    "champion": new.version,
                    "scifact_test_recall@5": round(mean, 4),
                    "ci95": [round(lo, 4), round(hi, 4)],
                    "vs_hybrid": {"diff": round(d, 4), "ci95_low": round(dlo, 4), "ci95_high": round(dhi, 4)},
                    "vs_general": dict(
                        zip(
                            ("diff", "ci95_low", "ci95_high"),
                            (round(x, 4) for x in paired_bootstrap(v, general, seed=cycle)),
                        )
                    ),
                    "val_recall@5_naive": m["val_recall@5"],
                    "val_recall@5_ips": m["val_recall@5_ips"],
                    "val_retrieval_order_naive": m["val_recall@5_retrieval_order"],
                    "val_retrieval_order_ips": m["val_recall@5_retrieval_order_ips"],
                    "val_queries": m["val_queries"],
                    "weights": record["weights"],  # the fitted fusion, or the general weights where it fell back
                    "fallback": m["fusion_fallback"],
                }
                if previous is not None:
                    d, dlo, dhi = paired_bootstrap(v, previous, seed=cycle)
                    row["vs_previous"] = {"diff": round(d, 4), "ci95_low": round(dlo, 4), "ci95_high": round(dhi, 4)}
                rows.append(row)
                log(
                    f"loop: cycle {cycle}: served by {champion.version}, served recall {served['served_recall']:.4f} "
                    f"(without exploration {served['served_recall_without_exploration']:.4f}); previews read whole "
                    f"{served['expanded']} ({served['expanded_relevant']} relevant), +{served['preview_token_share']:.1%} "
                    f"tokens; {new.version} on "
                    f"SciFact test {mean:.4f} vs hybrid {row['vs_hybrid']['diff']:+.4f} "
                    f"[{row['vs_hybrid']['ci95_low']:+.4f}, {row['vs_hybrid']['ci95_high']:+.4f}], vs general "
                    f"{row['vs_general']['diff']:+.4f} [{row['vs_general']['ci95_low']:+.4f}, "
                    f"{row['vs_general']['ci95_high']:+.4f}]; val naive "
                    f"{m['val_recall@5']:.4f} / ips {m['val_recall@5_ips']:.4f} (retrieval order "
                    f"{m['val_recall@5_retrieval_order']:.4f} / {m['val_recall@5_retrieval_order_ips']:.4f})"
                )
                previous, champion = v, new  # the new ranker serves the next slice
        # the last champion out of SciFact's domain: every other judged set evaluate reads, against general
        guards = {}
        for path in (b for b in ep.benchmarks.split(",") if b and b != tests[0] and Path(b).exists()):
            guards[bench_name(path)] = g = against_general(Path(path), champion, embedder, rule, bank, max_queries)
            d, dlo, dhi = (g["vs_general"][x] for x in ("diff", "ci95_low", "ci95_high"))
            log(
                f"loop: last champion on {bench_name(path)}: {g['ranker']:.4f} vs general {g['general']:.4f}, {d:+.4f} [{dlo:+.4f}, {dhi:+.4f}]"
            )
    worse = [r["cycle"] for r in rows if r.get("vs_previous") and r["vs_previous"]["ci95_high"] < 0]
    return {
        "consumer": consumer,
        "cycles": cycles,
        "explore_rate": search.explore_rate,
        "ipw_clip": rp.ipw_clip,
        "miss_rate": cp.miss_rate if consumer == "realistic" else None,
        "false_cite_rate": cp.false_cite_rate if consumer == "realistic" else None,
        "false_cite_grounded": cp.false_cite_grounded if consumer == "realistic" else None,
        "min_uncited": used.min_uncited,
        "void_thumbs_down": used.void_thumbs_down,
        "miss_quoted": cp.miss_quoted if consumer == "realistic" else None,
        "previews": search.previews,
        "previews_read": cp.previews_read if consumer == "realistic" else None,
        "expand_relevant": cp.expand_relevant if consumer == "realistic" else None,
        "expand_irrelevant": cp.expand_irrelevant if consumer == "realistic" else None,
        "held_out": {
            "benchmark": bench_name(tests[0]),
            "queries": len(items),
            "hybrid": round(float(hybrid.mean()), 4),
            "general": round(float(general.mean()), 4),
        },
        "rows": rows,
        "guards": guards,  # the last champion on the other judged sets, against general
        "no_cycle_worse_than_the_previous": not worse,
        "exploration_cost": round(
            float(np.mean([r["served_recall_without_exploration"] - r["served_recall"] for r in rows])), 4
        ),
        "preview_token_share": round(float(np.mean([r["preview_token_share"] for r in rows])), 4),
    }


def write_on_policy(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(result, indent=2) + "\n")


def print_on_policy(result: dict, console) -> None:
    t = Table(
        title=f"on-policy loop, {result['consumer']} consumer: explore_rate {result['explore_rate']}, ipw_clip "
        f"{result['ipw_clip']}; held out {result['held_out']['benchmark']} ({result['held_out']['queries']}), "
        f"hybrid {result['held_out']['hybrid']:.4f}"
    )
    for col in (
        "cycle",
        "served by",
        "served recall",
        "w/o exploration",
        "champion",
        "SciFact test",
        "vs hybrid [95% CI]",
        "vs general [95% CI]",
        "expanded",
        "+tokens",
    ):
        t.add_column(col, justify="right")
    t.add_column("val naive / ips (retrieval order)", justify="right")
    for r in result["rows"]:
        vh = r["vs_hybrid"]
        t.add_row(
            str(r["cycle"]),
            r["served_by"],
            f"{r['served_recall']:.4f}",
            f"{r['served_recall_without_exploration']:.4f}",
            r["champion"],
            f"{r['scifact_test_recall@5']:.4f}",
            f"{vh['diff']:+.4f} [{vh['ci95_low']:+.3f}, {vh['ci95_high']:+.3f}]",
            f"{r['vs_general']['diff']:+.4f} [{r['vs_general']['ci95_low']:+.3f}, {r['vs_general']['ci95_high']:+.3f}]",
            f"{r['previews']['expanded']} ({r['previews']['expanded_relevant']})",
            f"{r['preview_token_share']:+.1%}",
            f"{r['val_recall@5_naive']:.3f} / {r['val_recall@5_ips']:.3f} "
            f"({r['val_retrieval_order_naive']:.3f} / {r['val_retrieval_order_ips']:.3f})",
        )
    console.print(t)
    console.print(
        f"no cycle worse than the one before: {'yes' if result['no_cycle_worse_than_the_previous'] else 'NO'}; "
        f"exploration cost to the served context: {result['exploration_cost']:+.4f} Recall; previews "
        f"{result['previews']} (read {result['previews_read']}, expanded: relevant {result['expand_relevant']}, "
        f"irrelevant {result['expand_irrelevant']}): +{result['preview_token_share']:.1%} tokens over the context"
    )
