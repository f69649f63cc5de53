"""A cycle's steps in `pai lab cycle` (cli/lab/cycle.py): what the retrain made (the challenger against general, what
deploy did with it), the traffic that follows it until its trial decides, and the line the demo prints."""

from __future__ import annotations

import functools
import json
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

from eval.bench.trial_audit import audit_records
from eval.consumer import ReplayParams
from eval.evaluate import EvaluateParams
from eval.gate import DeployParams
from eval.items import against_general, bench_name, log_bank
from eval.registry import record_of
from retrieval.contracts.selection import FIRST_STAGE
from retrieval.db import connect
from retrieval.embed import get_embedder
from retrieval.fusion import GeneralRule
from retrieval.logs import trials
from retrieval.params import SearchParams, UsedParams, load_section
from serving.selectors import resolve
from training.pull import PullParams, pull

from .replay import replay


def challenger_row(params: Path) -> dict:
    """What this cycle's retrain made: the challenger against general on the in-domain judged split (SciFact test)
    and the other judged sets, and what deploy did with it (a trial started, or why not)."""
    evaluated = read_json(Path(load_section(params, "evaluate", EvaluateParams).out) / "eval.json") or {}
    deployed = read_json(Path(load_section(params, "deploy", DeployParams).metrics) / "deploy.json") or {}
    vs = {
        bench: r["paired_bootstrap"].get("ranker_vs_general")
        for bench, r in evaluated.items()
        if not bench.startswith("feedback") and "ranker_vs_general" in r.get("paired_bootstrap", {})
    }
    trial = deployed.get("trial") or {}
    return {
        "challenger": deployed.get("version"),
        "vs_general": vs,
        "deploy": "trial" if trial else deployed.get("alias") or "nothing registered",
        "deploy_reasons": deployed.get("reasons") or [],
        "trial_id": trial.get("id"),
    }


def traffic(
    url: str,
    claims: list,
    trial_id: int | None,
    consumer: ReplayParams,
    cycle: int,
    bar,
    cap: int = 10_000,
    used: UsedParams = UsedParams(),
) -> tuple[dict, dict | None]:
    """The traffic after a retrain: `claims` the challenger never learned from, asked once (what users got: the
    champion, with the trial's share interleaved), then again in fresh passes (new consumer draws, another order)
    until trial `trial_id` decides by its own rule (`max_judged` judged trial queries, `max_cited` cited ones); past
    `cap` queries (a trial that gathers no evidence) the demo stops it. (the first pass's summary, the trial as it closed, with the queries
    it took and what it could see: `what_the_trial_saw`, by the `used` definition); a promotion is waited for until the
    service serves it."""
    task = bar.add_task(f"2. cycle {cycle}: serve {len(claims)} new train claims", total=len(claims))
    first = replay(url, claims, functools.partial(bar.advance, task), replace(consumer, seed=consumer.seed + cycle))
    if trial_id is None:
        return first.as_dict(), None
    rng = random.Random(f"trial:{consumer.seed}:{cycle}")
    asked, trial = len(claims), _trial(trial_id)
    task = bar.add_task(f"2. cycle {cycle}: the traffic goes on until trial {trial_id} decides", total=None)
    while trial is not None and trial.status == "running" and asked < cap:
        asked += again(url, claims, rng, consumer, functools.partial(bar.advance, task))
        trial = _trial(trial_id)
    bar.update(task, total=asked - len(claims))  # done: its line stops counting
    if trial is not None and trial.status == "running":
        with connect() as conn:
            trial = trials.stop(conn, f"the demo's traffic cap: {asked} queries without a decision")
    audit = what_the_trial_saw(trial_id, claims, used)
    if trial is not None and trial.status == "promoted":  # announced: the service swaps it in (load, canary)
        deadline = time.monotonic() + 120
        while served_version(url) != trial.challenger and time.monotonic() < deadline:
            time.sleep(0.2)
    closed = trial.as_dict() if trial else {"id": trial_id, "status": "gone"}
    return first.as_dict(), {**closed, "queries_asked": asked, "audit": audit}


def again(url: str, claims: list, rng: random.Random, consumer: ReplayParams, advance) -> int:
    """One more pass of `claims`: another order, fresh consumer draws (the same questions asked again, as users do).
    How many were asked."""
    replay(url, rng.sample(claims, len(claims)), advance, replace(consumer, seed=rng.randrange(2**31)))
    return len(claims)


def what_the_trial_saw(trial_id: int, claims: list, used: UsedParams) -> dict:
    """The trial's log read by the claims' judgements (`eval.bench.trial_audit.audit_records`): on how many distinct
    questions one side alone put a relevant chunk before the consumer, and how many wins and losses a chunk that was
    not relevant decided. What a trial can decide on this traffic, beside what it decided."""
    relevant = {q.query: set(q.relevant) for q in claims}
    with connect() as conn:
        records = trials.trial_records(conn, trial_id)
        ids = list({c["chunk_id"] for r in records for c in r["candidates"] if c.get("chunk_id") is not None})
        sources = dict(conn.execute("SELECT id, source FROM chunks WHERE id = ANY(%s)", (ids,)).fetchall())
    out = audit_records(records, relevant, sources, used)
    return {
        k: out[k] for k in ("questions", "questions_with_own_relevant", "decided_by_not_relevant", "by_the_judged_set")
    }


def _trial(trial_id: int) -> trials.Trial | None:
    with connect() as conn:
        return trials.get(conn, trial_id)


def served_line(what: str, served_by: str, s: dict) -> str:
    return (
        f"{what}: served {s['queries']} claims by {served_by}: Recall {s['served_recall']:.3f} (general alone "
        f"{s['general_recall']:.3f}), previews read whole {s['expanded']} ({s['expanded_relevant']} relevant), "
        f"+{s['preview_token_share']:.1%} tokens"
    )


def cycle_line(row: dict) -> str:
    """One cycle, as the demo prints it: the retrain against general, the traffic that followed, the trial."""
    vs = row["vs_general"].get("scifact-test")
    head = f"cycle {row['cycle']}: retrained {row['challenger']}"
    if vs:
        head += (
            f", vs general on SciFact test {vs['recall@5_diff']:+.3f} [{vs['ci95_low']:+.3f}, {vs['ci95_high']:+.3f}]"
        )
    t = row.get("trial")
    if not t:
        decided = f"deploy: {row['deploy']}" + (
            f" ({'; '.join(row['deploy_reasons'])})" if row["deploy_reasons"] else ""
        )
    else:
        ev = t.get("evidence") or {}
        decided = (
            f"trial {t.get('id')}: {t['status']} after {ev.get('judged', '?')} judged trial queries "
            f"({ev.get('wins', '?')} wins, {ev.get('losses', '?')} losses, {ev.get('same', 0)} cited with the same "
            f"context; {t['queries_asked']} queries)"
        )
        if a := t.get("audit"):
            own = a["questions_with_own_relevant"]
            false = a["decided_by_not_relevant"]
            decided += (
                f"; by the qrels, one side alone showed a relevant chunk on {own['challenger']} (challenger) and "
                f"{own['champion']} (champion) of {a['questions']} questions, and {false['win']} wins and "
                f"{false['loss']} losses a chunk that was not relevant decided"
            )
    return (
        f"{head}; {decided}; "
        + served_line("then", row["served_by"], row["served"])
        + f"; champion now {row['champion']}"
    )


def served_version(url: str) -> str:
    """The selector version a running service answers with now."""
    return httpx.get(f"{url}/selector", timeout=30).json()["version"]


def read_json(path: str) -> dict | None:
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else None


LLM_STAGES = ("build", "train", "export", "evaluate_llm", "deploy_llm")  # the LLM's chain (dvc.yaml)


def llm_lines(pipeline: dict, stage_seconds: dict[str, float] | None = None) -> list[str]:
    """The LLM selector's learning after the last cycle: its loss first -> last, the share of its outputs that parse,
    and per benchmark Recall@5 of the base model, the fine-tuned one and general, with the paired deltas (95 % CI);
    the chain's wall time per stage when timed. No lines when the LLM's chain did not run."""
    tr, ev = pipeline.get("train") or {}, pipeline.get("eval_llm") or {}
    if not ev:
        return []
    out = [
        f"LLM selector ({tr.get('base_model')}): {tr.get('steps')} steps, loss {tr.get('train_loss_first')} -> "
        f"{tr.get('train_loss_last')}"
    ]
    ci = lambda v: f"{v['recall@5_diff']:+.3f} [{v['ci95_low']:+.3f}, {v['ci95_high']:+.3f}]"  # noqa: E731
    for bench, r in ev.items():
        sys_, vs = r["systems"], r["paired_bootstrap"]
        if "selector" not in sys_:
            continue
        tuned = sys_["selector"]
        line = f"  {bench} ({tuned['queries']} queries): Recall@5"
        if "base" in sys_:
            line += f" base {sys_['base']['recall@5']:.3f} ->"
        line += f" fine-tuned {tuned['recall@5']:.3f}"
        if "general" in sys_:
            line += f", general {sys_['general']['recall@5']:.3f}"
        line += f"; parses {tuned['json_valid']:.0%}"
        if "base" in sys_:
            line += f" (base {sys_['base']['json_valid']:.0%})"
        for ref in ("base", "general"):
            if v := vs.get(f"selector_vs_{ref}"):
                line += f"; fine-tuned - {ref} {ci(v)}"
        out.append(line)
    if stage_seconds:
        timed = {s: stage_seconds[s] for s in LLM_STAGES if s in stage_seconds}
        out.append(
            f"  LLM chain: {sum(timed.values()):.0f} s (" + ", ".join(f"{s} {t:.0f} s" for s, t in timed.items()) + ")"
        )
    return out


def champion_now(params: Path, version: str) -> dict:
    """The champion as its users get it at the end: with what the whole log's questions cited (`recalled`, read from a
    pull of the whole log, as the service reads it live), against general on every judged set evaluate reads, paired
    95 % CIs. {} while the first stage serves (it reads no evidence)."""
    if version == FIRST_STAGE:
        return {}
    ep = load_section(params, "evaluate", EvaluateParams)
    rule = GeneralRule.of(load_section(params, "search", SearchParams))
    selector, embedder = resolve(record_of(version)), get_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        pull(PullParams(out=tmp, lag_seconds=0.0))
        bank = log_bank(Path(tmp), embedder.encode)
        return {
            bench_name(b): against_general(Path(b), selector, embedder, rule, bank)
            for b in ep.benchmarks.split(",")
            if b and Path(b).exists()
        }


def champion_line(version: str, sets: dict) -> str:
    return (
        f"the champion now: {version}, with what the whole log cited: "
        + "; ".join(
            f"{name} {s['vs_general']['diff']:+.3f} [{s['vs_general']['ci95_low']:+.3f}, {s['vs_general']['ci95_high']:+.3f}]"
            for name, s in sets.items()
        )
        + " against general"
    )
