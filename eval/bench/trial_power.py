"""`pai lab trial`: how often the trial by interleaving promotes a challenger, against its judged gain.

Per domain (a judged contract-5 set), real rankers' orders over each query's candidates: the champion is the
first stage's fusion (`hybrid`: cosine and BM25 by reciprocal rank); the challengers are cosine, BM25, the
general weights' family (standardised cosine + w x BM25, several w), and rankers made worse on purpose (cosine
with noise, cosine against BM25). Each challenger's judged gain is its Recall@5 minus the champion's on the
set (paired 95 % CI). Then, per seed, a trial as the service runs it: queries drawn from the set, the two
rankings merged by team-draft (`retrieval.contracts.interleaving`), the context the first `k` of the merge, a
consumer who cites a relevant context item with `p_relevant` and any other with `p_other`, and the stopping
rule read after every cited query (`trial` params). Reported: the share of seeds that promote, the cited
queries to a decision, and what users got during the trial against the champion alone (its cost).

The statistics alone, on real orders: the service's own path (logging, teams, settle) is tested in
tests/serving/test_trial.py.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.contracts.interleaving import Tally, TrialParams, agreed_first, sides, team_draft
from retrieval.contracts.lexical import lexical_scores
from retrieval.contracts.metrics import paired_bootstrap, recall_at_k
from retrieval.contracts.passage import passage_text
from retrieval.contracts.ranking_features import standardise
from retrieval.embed import Embedder
from retrieval.query.order import rrf

CHAMPION_RANKER = "hybrid"
# How a trial's context is made from the two rankings: agreed-first is what the service serves; the others are the
# designs measured against it (docs/measurements.md, "The trial by interleaving"), kept here, in the lab only.
MERGES = ("agreed-first", "team-draft", "union")


@dataclass(frozen=True)
class Consumer:
    p_relevant: float = 0.8  # a relevant item in the context is cited
    p_other: float = 0.05  # any other is cited anyway
    previews: int = 0  # how many of the items after the context it reads as previews (loop_trial's serving)
    expand_relevant: float = 0.0  # a relevant preview read whole (then cited as a context item is)
    expand_other: float = 0.05  # any other preview read whole

    @classmethod
    def realistic(cls, previews: int, previews_read: int, expand_relevant: float, expand_other: float) -> Consumer:
        """replay's realistic consumer (params.yaml `replay`) under the trial's citing chances: it reads the first
        `previews_read` of the `previews` listed lines, and expands them by its chances."""
        return cls(previews=min(previews, previews_read), expand_relevant=expand_relevant, expand_other=expand_other)


def rankings(items: list[dict], embedder: Embedder, seed: int = 0) -> dict[str, dict[str, list[str]]]:
    """name -> qid -> candidate ids best first, for the champion and every challenger."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, list[str]]] = {}
    for it in items:
        cands = it["candidates"]
        ids = [c["id"] for c in cands]
        q = embedder.encode([it["query"]])[0]
        vecs = embedder.encode_passages(
            [passage_text(c.get("title"), c["text"], c.get("parent_heading")) for c in cands]
        )
        cos = standardise(vecs @ q)
        bm = standardise(
            np.asarray(lexical_scores(it["query"], [f"{c.get('title') or ''} {c['text']}" for c in cands]))
        )
        order = {
            "cosine": cos,
            "bm25": bm,
            **{f"cosine+{w:g}bm25": cos + w * bm for w in (0.25, 0.5, 1.0, 2.0)},
            "cosine-0.5bm25": cos - 0.5 * bm,
            **{f"cosine+noise{s:g}": cos + rng.normal(0, s, len(cos)) for s in (0.5, 1.0, 2.0)},
        }
        ranked = {name: [ids[i] for i in np.argsort(-score, kind="stable")] for name, score in order.items()}
        ranked[CHAMPION_RANKER] = rrf([ranked["cosine"], ranked["bm25"]], 60)
        for name, r in ranked.items():
            out.setdefault(name, {})[it["qid"]] = r
    return out


def context(
    champ: list, chall: list, rng: random.Random, k: int, merge: str = "agreed-first", previews: int = 0
) -> tuple[list, list, dict]:
    """(the trial's context, the `previews` items listed after it, item -> side of each item in either) by `merge`:
    `agreed-first`, the items both top k hold, then the team-draft of the items they disagree on, k in all, as served
    (`interleaving.agreed_first`); `team-draft`, the merge's first k, as served before; `union`, every item of either
    top k (up to 2k: the context grows), in team-draft order. The previews are the merge's next items, as the
    service lists them (`retrieval.query.previews.following`), and each one side alone would serve has that side."""
    if merge == "union":
        both = sides(list(dict.fromkeys([*champ[:k], *chall[:k]])), champ, chall, k)  # both top k, each item's side
        order = [x for x, _ in team_draft(champ, chall, rng)]
        listed = [x for x in order if x not in both][:previews]  # below both top k: no side
        return [x for x in order if x in both], listed, both
    if merge == "agreed-first":
        order = agreed_first(champ, chall, k, rng)[0]
    elif merge == "team-draft":
        order = [x for x, _ in team_draft(champ, chall, rng)]
    else:
        raise ValueError(f"merge {merge!r}: one of {', '.join(MERGES)}")
    shown, listed = order[:k], order[k : k + previews]
    return shown, listed, sides([*shown, *listed], champ, chall, k)


def reads(listed: list, rel: set, consumer: Consumer, rng: random.Random) -> list:
    """The previews the lab's consumer reads whole: of the first `consumer.previews` listed, a relevant one with
    `expand_relevant`, any other with `expand_other`."""
    return [
        x
        for x in listed[: consumer.previews]
        if rng.random() < (consumer.expand_relevant if x in rel else consumer.expand_other)
    ]


def cited(shown: list, read: list, rel: set, consumer: Consumer, rng: random.Random) -> set:
    """What the lab's consumer cites of what it read: the context and the previews it read whole alike, a relevant
    item with `p_relevant`, any other with `p_other`."""
    return {x for x in (*shown, *read) if rng.random() < (consumer.p_relevant if x in rel else consumer.p_other)}


def cites(shown: list, listed: list, rel: set, consumer: Consumer, rng: random.Random) -> set:
    """What the lab's consumer cites after a context `shown` and previews `listed` (`reads`, then `cited`; the same
    consumer as `eval.bench.loop_trial.serve`'s)."""
    return cited(shown, reads(listed, rel, consumer, rng), rel, consumer, rng)


def trial(
    items: list[dict],
    champ: dict,
    chall: dict,
    rule: TrialParams,
    consumer: Consumer,
    k: int,
    seed: int,
    merge: str = "agreed-first",
) -> dict:
    """One simulated trial: its decision, the judged queries it took, the interleaved queries (`queries`) and the
    users' queries they stand for (`served`: each interleaved one at the share then, `TrialParams.share_at`, stands
    for 1 / share of them), and the served Recall@k it cost over the users' queries."""
    rng = random.Random(seed)
    tally, queries, served, share = Tally(), 0, 0.0, rule.share
    cost = 0.0
    while queries < 50 * rule.max_cited:
        it = items[rng.randrange(len(items))]
        rel, q = set(it["relevant_ids"]), it["qid"]
        shown, listed, side = context(champ[q], chall[q], rng, k, merge, consumer.previews)
        queries, served = queries + 1, served + 1 / share
        cost += recall_at_k(rel, champ[q], k) - recall_at_k(rel, shown, len(shown))
        used = cites(shown, listed, rel, consumer, rng)
        if not used:
            continue
        tally.add(side, used)  # a context both would serve is not judged
        v = tally.verdict(rule)
        share = rule.share_at(v.evidence_for)
        if v.decision:
            break
    else:
        v = tally.verdict(rule)
    return {
        "decision": v.decision or "undecided",
        "judged": v.judged,
        "cited": v.judged + v.same,
        "queries": queries,
        "served": round(served),
        "cost": cost / served,
        "served_fixed": round(queries / rule.share),  # the same trial at a share that never rises
        "cost_fixed": rule.share * cost / queries,
    }


def domain_report(
    items: list[dict],
    embedder: Embedder,
    rule: TrialParams,
    consumer: Consumer,
    seeds: int,
    k: int = 5,
    progress=None,
    champion: str = CHAMPION_RANKER,
    merge: str = "agreed-first",
) -> list[dict]:
    """One row per challenger against `champion` (one of the rankers: the first stage's `hybrid`, or another to
    see the trial from a weaker champion's side)."""
    ranked = rankings(items, embedder)
    rel = {it["qid"]: set(it["relevant_ids"]) for it in items}
    base = np.array([recall_at_k(rel[q], ranked[champion][q], k) for q in rel])
    rows = []
    for name, chall in ranked.items():
        if name == champion:
            continue
        mine = np.array([recall_at_k(rel[q], chall[q], k) for q in rel])
        diff, lo, hi = paired_bootstrap(mine, base)
        runs = [trial(items, ranked[champion], chall, rule, consumer, k, s, merge) for s in range(seeds)]
        judged = sorted(r["judged"] for r in runs if r["decision"] == "promote") or [0]
        rows.append(
            {
                "challenger": name,
                "recall@5": round(float(mine.mean()), 4),
                "gain": round(float(diff), 4),
                "ci95": [round(float(lo), 4), round(float(hi), 4)],
                "promoted": round(sum(r["decision"] == "promote" for r in runs) / seeds, 3),
                "rejected": round(sum(r["decision"] == "reject" for r in runs) / seeds, 3),
                "median_judged_to_promote": judged[len(judged) // 2],
                "median_judged": sorted(r["judged"] for r in runs)[seeds // 2],
                "median_served": sorted(r["served"] for r in runs)[seeds // 2],  # the users' queries to a decision
                "median_served_fixed": sorted(r["served_fixed"] for r in runs)[seeds // 2],
                "max_cost_fixed": round(max(r["cost_fixed"] for r in runs), 4),
                "max_cost": round(max(r["cost"] for r in runs), 4),
                "mean_cost": round(float(np.mean([r["cost"] for r in runs])), 4),
            }
        )
        if progress:
            progress()
    return sorted(rows, key=lambda r: r["gain"])


def scifact_items(benchmark_dir: Path, embedder: Embedder, split: str = "test", n: int = 20) -> list[dict]:
    """SciFact claims with the corpus's top-n by our fused first stage (cosine and BM25 over the whole corpus)."""
    sf = benchmark_dir / "scifact"
    corpus = [json.loads(line) for line in open(sf / "corpus.jsonl", encoding="utf-8")]
    texts = [f"{d['title']} {d['text']}" for d in corpus]
    vecs = np.concatenate(
        [
            embedder.encode_passages([passage_text(d["title"], d["text"]) for d in corpus[i : i + 256]])
            for i in range(0, len(corpus), 256)
        ]
    )
    rel: dict[str, set[str]] = {}
    with open(sf / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            rel.setdefault(row["query-id"], set()).add(row["corpus-id"])
    claims = {q["_id"]: q["text"] for q in map(json.loads, open(sf / "queries.jsonl", encoding="utf-8"))}
    items = []
    for qid, docs in rel.items():
        q = embedder.encode([claims[qid]])[0]
        dense = list(np.argsort(-(vecs @ q))[: 4 * n])
        sparse = list(np.argsort(-np.asarray(lexical_scores(claims[qid], texts)))[: 4 * n])
        cands = [corpus[int(i)] for i in rrf([dense, sparse], 60)[:n]]
        items.append(
            {
                "qid": qid,
                "query": claims[qid],
                "candidates": [{"id": d["_id"], "title": d["title"], "text": d["text"]} for d in cands],
                "relevant_ids": sorted(docs),
            }
        )
    return items
