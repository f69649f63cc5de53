"""`python -m eval.bench.trial_audit`: does the trial judge what users get? Two reads of one store.

`logged`: each trial in the store's log, tallied twice over the same cited queries: by the log's own labels (the
one definition of "used", as the service credits them) and by the judged set's relevance of what was shown (a
consumer that cites exactly the relevant chunks it sees); beside them, how many chunks one side alone would have
served each side got shown, and how many of those that were not relevant the consumer cited. A side shown more of
its own chunks collects more of the false cites; where the two tallies part, the trial is judging its exposure.

`replay`: the same comparison on the registry's rankers, simulated: each judged query's candidates ranked by the
champion and the challenger as served (the ranker's pick topped up by the first stage's order), the context as many
chunks as the token budget lets the smaller side hold, merged by each design of `trial_power.MERGES`; a consumer
citing a relevant chunk in it with `p_relevant` and any other with `p_other`; `decide` read after every cited query.
Beside each design's decisions, the truth: served Recall of the challenger's own context minus the champion's
(both cut by the budget), and Recall@5 minus Recall@5.

AMD EPYC figures and their commands: docs/measurements.md, "The trial's exposure".
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from eval import registry
from eval.items import load_items
from eval.retrieval_eval import doc_ids, load_scifact
from eval.systems import general_ranking, selector_pick
from retrieval.chunking import approx_tokens
from retrieval.contracts.interleaving import CHALLENGER, CHAMPION, TEAMS, Tally, TrialParams, differs, outcome
from retrieval.contracts.metrics import recall_at_k
from retrieval.contracts.selection import FIRST_STAGE
from retrieval.db import connect
from retrieval.embed import get_embedder
from retrieval.fusion import GeneralRule
from retrieval.logs import trials
from retrieval.logs.used import used_labels
from retrieval.params import SearchParams, UsedParams, load_section
from serving.selectors import resolve

from .trial_power import MERGES, context

app = typer.Typer(add_completion=False)


def audit_records(
    records: list[dict], relevant: dict[str, set[str]], sources: dict[int, str], used: UsedParams
) -> dict:
    """One trial's cited queries tallied by the log's labels and by the judged relevance of what was shown (only the
    queries whose text the judged set holds); and what the trial could see at all: the distinct questions on which
    one side alone put a relevant chunk before the consumer (context or previews), and how many of the log's wins
    and losses a cited chunk that is not relevant decided (nothing relevant of that side was cited)."""
    by_used, by_judge = Tally(), Tally()
    exposure, false_cites, decided_by_false = Counter(), Counter(), Counter()
    questions: set[str] = set()
    own_relevant: dict[str, set[str]] = {t: set() for t in TEAMS}
    for rec in records:
        rel = relevant.get(rec["query"])
        if rel is None:
            continue
        questions.add(rec["query"])
        rec = used_labels(rec, used)
        shown = [c for c in rec["candidates"] if c.get("shown") and c.get("team")]
        teams = trials.exposed_teams(rec)  # the context's and the previews' sides, as the trial reads them
        is_rel = {c["rank"]: doc_ids([sources.get(c["chunk_id"], "#")])[0] in rel for c in rec["candidates"]}
        judged = {c["rank"] for c in shown if is_rel[c["rank"]]}
        cited = {c["rank"] for c in rec["candidates"] if c.get("used") and c["rank"] in teams}
        for c in shown:
            if c["team"] in TEAMS:
                exposure[c["team"]] += 1
                false_cites[c["team"]] += c["rank"] in cited and c["rank"] not in judged
        for rank, team in teams.items():
            if team in TEAMS and is_rel[rank]:
                own_relevant[team].add(rec["query"])
        o = outcome(teams, cited) if differs(teams) else 0
        if o:  # the winner's own cited chunks: did a relevant one decide it?
            winner = CHALLENGER if o > 0 else CHAMPION
            decided_by_false["win" if o > 0 else "loss"] += not any(is_rel[r] for r in cited if teams.get(r) == winner)
        by_used.add(teams, cited)
        by_judge.add({c["rank"]: c["team"] for c in shown}, judged)  # the judged set reads the served context
    return {
        "by_the_log": asdict(by_used),
        "by_the_judged_set": asdict(by_judge),
        "own_chunks_shown": dict(exposure),
        "own_chunks_cited_not_relevant": dict(false_cites),
        "questions": len(questions),
        "questions_with_own_relevant": {t: len(q) for t, q in own_relevant.items()},
        "decided_by_not_relevant": {k: decided_by_false[k] for k in ("win", "loss")},
    }


@app.command()
def logged(
    benchmark_dir: Annotated[Path, typer.Option(help="the judged SciFact folder (claims and qrels)")] = Path(
        "data/judged"
    ),
    params: Annotated[Path, typer.Option(help="params.yaml (its `used` section)")] = Path("params.yaml"),
) -> None:
    """Every trial in the store $PAI_HOME / DATABASE_URL names, tallied by its log and by SciFact's judgements."""
    relevant = {text: set(rel) for split in ("train", "test") for _, text, rel in load_scifact(benchmark_dir, split)}
    used = load_section(params, "used", UsedParams)
    out = {}
    with connect() as conn:
        sources = dict(conn.execute("SELECT id, source FROM chunks").fetchall())
        for t in reversed(trials.recent(conn, 100)):
            row = audit_records(trials.trial_records(conn, t.id), relevant, sources, used)
            out[t.id] = {"champion": t.champion, "challenger": t.challenger, "status": t.status, **row}
    print(json.dumps(out, indent=2))


def served_lists(items: list[dict], versions: list[str], rule: GeneralRule) -> dict[str, dict[str, list[str]]]:
    """version -> qid -> candidate ids as that version serves them: its pick, topped up by the first stage's order."""
    embedder = get_embedder()
    selectors = {v: resolve(registry.record_of(v)) for v in versions if v != FIRST_STAGE}
    out: dict[str, dict[str, list[str]]] = {v: {} for v in versions}
    for it in items:
        first = general_ranking(embedder, it, rule)
        for v in versions:
            pick = list(selector_pick(selectors[v], it, first, 5).ids) if v in selectors else []
            out[v][it["qid"]] = pick + [x for x in first if x not in pick]
    return out


def budget_cut(order: list[str], tokens: dict[str, int], budget: int, floor: int) -> int:
    """How many of `order` the context holds (`retrieval.query.search.take_budget`'s rule)."""
    n = used = 0
    for x in order:
        if used + tokens[x] > budget and n >= floor:
            break
        n, used = n + 1, used + tokens[x]
    return n


def served_size(it: dict, orders: dict[str, list[str]], search: SearchParams) -> int:
    """How many chunks the context holds for item `it` served in `orders`' order (by the token budget)."""
    tokens = {c["id"]: approx_tokens(c["text"]) for c in it["candidates"]}
    return budget_cut(orders[it["qid"]], tokens, search.token_budget, search.min_chunks)


def replay_trials(
    items: list[dict],
    champ: dict[str, list[str]],
    chall: dict[str, list[str]],
    search: SearchParams,
    rule: TrialParams,
    merge: str,
    seed: int,
    p_relevant: float,
    p_other: float,
) -> dict:
    """One simulated trial as the service runs it (queries drawn with replacement until `decide` decides)."""
    rng = random.Random(seed)
    tally = Tally()
    k_of = {it["qid"]: min(served_size(it, x, search) for x in (champ, chall)) for it in items}  # once per item
    while True:
        it = items[rng.randrange(len(items))]
        q, rel = it["qid"], set(it["relevant_ids"])
        shown, _, side = context(champ[q], chall[q], rng, k_of[q], merge)
        used = {x for x in shown if rng.random() < (p_relevant if x in rel else p_other)}
        if used:
            tally.add(side, used)
            v = tally.verdict(rule)
            if v.decision:
                worse = v.evidence_against >= 1 / rule.alpha
                return {
                    "decision": v.decision,
                    "worse": worse,
                    "wins": v.wins,
                    "losses": v.losses,
                    "judged": v.judged,
                    "same": v.same,
                }


def truth(items: list[dict], champ: dict, chall: dict, search: SearchParams) -> dict:
    """The challenger's own served context's Recall minus the champion's (each cut by the budget), and Recall@5's."""
    served, at5 = [], []
    for it in items:
        q, rel = it["qid"], set(it["relevant_ids"])
        mine, theirs = served_size(it, champ, search), served_size(it, chall, search)
        served.append(recall_at_k(rel, chall[q], theirs) - recall_at_k(rel, champ[q], mine))
        at5.append(recall_at_k(rel, chall[q], 5) - recall_at_k(rel, champ[q], 5))
    return {"served_recall_diff": round(float(np.mean(served)), 4), "recall@5_diff": round(float(np.mean(at5)), 4)}


@app.command()
def replay(
    benchmark: Annotated[Path, typer.Option(help="a contract-5 file of the store's judged queries")],
    pairs: Annotated[str, typer.Option(help="champion>challenger pairs, comma-separated (first-stage or versions)")],
    seeds: Annotated[int, typer.Option(help="simulated trials per pair and design")] = 20,
    p_relevant: Annotated[float, typer.Option(help="a relevant chunk in the context is cited")] = 0.8,
    p_other: Annotated[str, typer.Option(help="any other is cited, comma-separated values")] = "0.05,0",
    params: Annotated[Path, typer.Option(help="params.yaml (search, trial)")] = Path("params.yaml"),
) -> None:
    """Simulated trials between the registry's rankers on a judged file, per design; the truth beside them."""
    search, rule = load_section(params, "search", SearchParams), load_section(params, "trial", TrialParams)
    items = [it for it in load_items(benchmark, 0) if it.get("relevant_ids")]
    duels = [tuple(p.split(">")) for p in pairs.split(",") if p]
    lists = served_lists(items, sorted({v for d in duels for v in d}), GeneralRule.of(search))
    out = []
    for a, b in duels:
        row = {"champion": a, "challenger": b, **truth(items, lists[a], lists[b], search), "designs": []}
        for merge in MERGES[:2]:
            for other in (float(x) for x in p_other.split(",")):
                runs = [
                    replay_trials(items, lists[a], lists[b], search, rule, merge, s, p_relevant, other)
                    for s in range(seeds)
                ]
                row["designs"].append(
                    {
                        "merge": merge,
                        "p_other": other,
                        "promoted": sum(r["decision"] == "promote" for r in runs),
                        "rejected": sum(r["decision"] == "reject" for r in runs),
                        "rejected_as_worse": sum(r["worse"] for r in runs),
                        "wins_mean": round(float(np.mean([r["wins"] for r in runs])), 1),
                        "losses_mean": round(float(np.mean([r["losses"] for r in runs])), 1),
                        "judged_median": int(np.median([r["judged"] for r in runs])),
                    }
                )
        out.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    app()
