"""`pai lab loop trial`: on-policy cycles in which only the trial by interleaving decides a promotion, and the
judged test split scores each decision afterwards.

Per domain, the judged items (a query, its candidates, its relevant ids) are split by a hash of the qid into
*traffic* (the user's queries) and *test* (the judge: never logged, trained on or interleaved). Cycle 1's
champion is the first stage's order (`first-stage`: as `search.fusion` orders the candidates). Each cycle:
1. serve: the next slice of traffic gets the champion's top k (exploration as the service does it: with
   `explore_rate` the last slot goes to a random candidate below the cut, its propensity logged); a consumer
   cites context items (`trial_power.Consumer`); each query becomes a feedback record in the pull stage's
   format (`retrieval.logs.feedback_records.FeedbackRecord`).
2. retrain: `train(records)` (the caller's: the real `train_ranker.train`) on everything logged so far -> the
   challenger `retrained`. Two challengers that are truly worse go on trial beside it: `flipped`, trained on the
   same log with used and ignored turned over among the shown candidates, and `other-domain`, the next domain's
   retrained ranker of the same cycle.
3. trial: each challenger against the champion, separately, by `trial_power.trial` (agreed-first interleaving,
   the consumer cites in the interleaved context, `decide` read after every cited query). Its queries are drawn
   from the traffic split at random with replacement, with fresh consumer randomness: a trial longer than the
   split passes over it more than once (`passes`).
   With several `merges` (`trial_power.MERGES`: agreed-first, as served, and the lab's other designs), each
   challenger's trial runs once per merge on the same seed; the
   training is shared, and the first merge's decision is the one applied (the others ride on its cycles).
4. promote the retrained challenger only if its trial (the first merge's) says "promote"; a worse challenger's
   promotion is counted (a wrong promotion), never applied.
5. judge: each challenger's Recall@k minus the champion's on the test split, with a paired 95 % CI.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import numpy as np

from retrieval.contracts.interleaving import TrialParams
from retrieval.contracts.metrics import paired_bootstrap, recall_at_k
from retrieval.query.order import rrf_scores
from retrieval.query.previews import following, listed_propensity

from .trial_power import MERGES, Consumer, cited, reads, trial

SERVED = MERGES[0]  # agreed-first: the merge the service serves

Orders = dict[str, list[str]]  # qid -> candidate ids, best first
Ranker = Callable[[list[dict]], Orders]  # items -> their orders
WORSE, BETTER = (
    -0.01,
    0.05,
)  # judged gains: a promotion at or below WORSE is wrong, a rejection at or above BETTER a miss


def split(items: list[dict], test_fraction: float) -> tuple[list[dict], list[dict]]:
    """(traffic, test) by a stable hash of each item's qid."""
    traffic, test = [], []
    for it in items:
        h = int(hashlib.sha256(str(it["qid"]).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        (test if h < test_fraction else traffic).append(it)
    return traffic, test


def expose(order: list[str], k: int, rate: float, rng: random.Random) -> tuple[list[str], dict[str, float]]:
    """(context, id -> P(shown)): the top k, and with probability `rate` the last slot given to a candidate drawn
    uniformly below the cut (serving.picker's exploration)."""
    context, below = list(order[:k]), list(order[k:])
    propensity = {x: 1.0 for x in context}
    if not (rate and context and below):
        return context, propensity
    propensity[context[-1]] = 1.0 - rate
    propensity.update({x: rate / len(below) for x in below})
    if rng.random() < rate:
        context[-1] = rng.choice(below)
    return context, propensity


def lab_chunk_id(cid: str) -> int:
    """A lab candidate's chunk id: the same for the same candidate id in every query (what similar past questions
    cited is read by it: `retrieval.contracts.recalled`), as a store's chunk id is."""
    return int.from_bytes(hashlib.sha256(str(cid).encode()).digest()[:6], "big")


def record(
    query_id: int,
    item: dict,
    first_stage: list[str],
    served: list[str],
    context: list[str],
    p: dict,
    used: set,
    listed: dict[str, float] | None = None,
    expanded: frozenset = frozenset(),
) -> dict:
    """One served query as the pull stage exports it (`FeedbackRecord`): candidates in the first stage's order;
    `listed`, id -> P(previewed) of the previews listed after the context, `expanded` those the consumer read whole
    (labelled as the shown ones are)."""
    listed = listed or {}
    by_id = {c["id"]: c for c in item["candidates"]}
    fused = rrf_scores([first_stage], 60)
    place = {x: i for i, x in enumerate(served, start=1)}
    cands = []
    for rank, cid in enumerate(first_stage, start=1):
        c, shown = by_id[cid], cid in context
        cands.append(
            {
                "rank": rank,
                "chunk_id": lab_chunk_id(cid),
                "content_hash": hashlib.sha256(c["text"].encode()).hexdigest(),
                "score": round(fused[cid], 6),
                "source": f"{item.get('domain', 'lab')}/{cid}",
                "heading": c.get("title"),
                "parent_heading": c.get("parent_heading"),
                "text": c["text"],
                "pick_rank": place.get(cid),
                "served_rank": place.get(cid),
                "shown": shown,
                "propensity": p.get(cid, 0.0),
                "previewed": cid in listed,
                "preview_propensity": listed.get(cid, 0.0),
                "expanded": cid in expanded,
                "used": True if cid in used else False if shown or cid in expanded else None,
            }
        )
    return {
        "query_id": query_id,
        "query": item["query"],
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "selector_version": "lab",
        "picked_by": "lab",
        "prompt_version": None,
        "selection_status": "ok",
        "threshold": None,
        "rating": None,
        "correction": None,
        "answer": None,
        "candidates": cands,
    }


def serve(
    items: list[dict],
    champion: Orders,
    first_stage: Orders,
    consumer: Consumer,
    k: int,
    explore_rate: float,
    rng: random.Random,
    first_id: int,
) -> tuple[list[dict], float]:
    """(feedback records, mean served Recall@k): `items` served by the champion, the consumer citing in context and
    in the previews it read whole (`consumer.previews` listed after the context, as the service lists them)."""
    records, got = [], []
    same = lambda x: x  # noqa: E731 - the lab's items are their own keys
    for i, it in enumerate(items):
        rel, order = set(it["relevant_ids"]), champion[it["qid"]]
        planned = order[:k]
        context, p = expose(order, k, explore_rate, rng)
        served = [*context, *(x for x in order if x not in context)]
        chance = listed_propensity(planned, order, order, consumer.previews, explore_rate, same)
        previews = following(context, served, order, consumer.previews, same)
        listed = {x: chance[x] for x in previews}  # what this query listed (the others could have been, were not)
        read = reads(previews, rel, consumer, rng)
        used = cited(context, read, rel, consumer, rng)
        expanded = frozenset(read)
        records.append(record(first_id + i, it, first_stage[it["qid"]], served, context, p, used, listed, expanded))
        got.append(recall_at_k(rel, context, k))
    return records, float(np.mean(got)) if got else 0.0


def flipped(records: list[dict]) -> list[dict]:
    """The log with its labels turned over: used <-> ignored among the shown candidates."""
    return [
        {**r, "candidates": [{**c, "used": not c["used"]} if c["used"] is not None else c for c in r["candidates"]]}
        for r in records
    ]


def judged(test: list[dict], champion: Orders, challenger: Orders, k: int, seed: int) -> dict:
    """The challenger's Recall@k on the test split, and its gain over the champion's with a paired 95 % CI."""
    mine = np.array([recall_at_k(set(it["relevant_ids"]), challenger[it["qid"]], k) for it in test])
    base = np.array([recall_at_k(set(it["relevant_ids"]), champion[it["qid"]], k) for it in test])
    d, lo, hi = paired_bootstrap(mine, base, seed=seed)
    return {
        "champion_recall": round(float(base.mean()), 4),
        "recall": round(float(mine.mean()), 4),
        "gain": round(float(d), 4),
        "ci95": [round(float(lo), 4), round(float(hi), 4)],
    }


def run(
    domains: dict[str, list[dict]],
    first_stage: dict[str, Orders],
    train: Callable[[list[dict]], Ranker],
    rule: TrialParams,
    consumer: Consumer,
    cycles: int,
    seeds: list[int],
    k: int = 5,
    test_fraction: float = 0.3,
    explore_rate: float = 0.0,
    log: Callable[[str], None] = print,
    merges: list[str] | None = None,
    done: Callable[[dict], object] | None = None,
) -> dict:
    """Every seed's cycles over every domain in step (the other-domain challenger is the next domain's retrained
    ranker of the same cycle). `first_stage`: domain -> every item's first-stage order (cycle 1's champion).
    `merges`: the trial's merges to run each challenger under (default agreed-first, as served); the first decides.
    `done`: given the report so far after each seed (a run stopped later keeps the seeds it finished)."""
    merges = merges or [SERVED]
    parts = {d: split(items, test_fraction) for d, items in domains.items()}
    names, rows = list(domains), []
    for i, seed in enumerate(seeds):
        champion = {d: ("first-stage", first_stage[d]) for d in names}
        logs: dict[str, list[dict]] = {d: [] for d in names}
        stream = {d: random.Random(seed).sample(parts[d][0], len(parts[d][0])) for d in names}
        for cycle in range(1, cycles + 1):
            rankers, served = {}, {}
            for d in names:
                traffic = stream[d]
                part = traffic[len(traffic) * (cycle - 1) // cycles : len(traffic) * cycle // cycles]
                rng = random.Random(f"{seed}/{d}/{cycle}/serve")
                recs, served[d] = serve(
                    part, champion[d][1], first_stage[d], consumer, k, explore_rate, rng, len(logs[d]) + 1
                )
                logs[d] += recs
                log(f"seed {seed} cycle {cycle} {d}: served {len(part)} queries by {champion[d][0]}; retraining")
                rankers[d] = {"retrained": train(list(logs[d])), "flipped": train(flipped(logs[d]))}
            for n, d in enumerate(names):
                traffic, test = parts[d]
                kinds = dict(rankers[d])
                if len(names) > 1:
                    kinds["other-domain"] = rankers[names[(n + 1) % len(names)]]["retrained"]
                every, promoted = traffic + test, champion[d]
                for kind, ranker in kinds.items():
                    orders = ranker(every)
                    score = judged(test, champion[d][1], orders, k, seed)
                    for m in merges:
                        seed_ = hash_seed(seed, d, cycle, kind)
                        out = trial(traffic, champion[d][1], orders, rule, consumer, k, seed=seed_, merge=m)
                        row = {
                            "seed": seed,
                            "domain": d,
                            "cycle": cycle,
                            "champion": champion[d][0],
                            "challenger": kind if kind != "other-domain" else f"{kind} ({names[(n + 1) % len(names)]})",
                            "kind": kind,
                            "merge": m,
                            "logged_queries": len(logs[d]),
                            "served_recall": round(served[d], 4),
                            **score,
                            **out,
                            "passes": round(out["queries"] / len(traffic), 2),  # trial queries over the traffic split
                        }
                        rows.append(row)
                        log(
                            f"seed {seed} cycle {cycle} {d}: {kind} judged {score['gain']:+.4f} "
                            f"[{score['ci95'][0]:+.4f}, {score['ci95'][1]:+.4f}] -> {m}: {out['decision']} "
                            f"after {out['judged']} cited queries ({row['passes']} passes over traffic), "
                            f"cost {out['cost']:+.4f}"
                        )
                        if kind == "retrained" and m == merges[0] and out["decision"] == "promote":
                            promoted = (f"retrained@{cycle}", orders)
                champion[d] = promoted  # after every challenger's trial: all of a cycle's face the same champion
        report = {
            "domains": {d: {"traffic": len(parts[d][0]), "test": len(parts[d][1])} for d in names},
            "seeds_done": seeds[: i + 1],
            "rows": list(rows),
            "summary": summary(rows, rule),
        }
        if done:
            done(report)
    return report


def hash_seed(*parts) -> int:
    return int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def summary(rows: list[dict], rule: TrialParams) -> dict:
    """Per domain and over all (per merge, "DOMAIN (MERGE)", when the rows hold several): the issue's targets read on
    the trials (gains are the judged point estimates)."""
    merges = list(dict.fromkeys(r.get("merge", SERVED) for r in rows)) or [SERVED]
    out = {}
    for m in merges:
        for d in [*dict.fromkeys(r["domain"] for r in rows), "all"]:
            rs = [r for r in rows if d in ("all", r["domain"]) and r.get("merge", SERVED) == m]
            out[d if len(merges) == 1 else f"{d} ({m})"] = targets(rs, rule)
    return out


def targets(rs: list[dict], rule: TrialParams) -> dict:
    better = [r for r in rs if r["gain"] >= BETTER]
    worse = [r for r in rs if r["gain"] <= WORSE]
    promoted = [r for r in better if r["decision"] == "promote"]
    cited = [r["judged"] for r in rs]
    return {
        "trials": len(rs),
        "better_by_0.05": len(better),
        "better_promoted": len(promoted),
        "better_promoted_within_max_judged": sum(r["judged"] <= rule.max_judged for r in promoted),
        "misses": len(better) - len(promoted),
        "worse_by_0.01": len(worse),
        "wrong_promotions": sum(r["decision"] == "promote" for r in worse),
        "promotions": sum(r["decision"] == "promote" for r in rs),
        "rejections": sum(r["decision"] == "reject" for r in rs),
        "cited_median": float(np.median(cited)) if cited else 0.0,
        "cited_max": max(cited, default=0),
        "max_cost": round(max((r["cost"] for r in rs), default=0.0), 4),
        "mean_cost": round(float(np.mean([r["cost"] for r in rs])), 4) if rs else 0.0,
    }
