"""Benchmark items (contract 5) for the evaluation: a file of them read and checked, and the held-out
feedback split as items (relevant = used by the one definition build and train_ranker read, each weighed by
its inverse propensity)."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.contracts.metrics import paired_bootstrap, per_query
from retrieval.contracts.recalled import Bank
from retrieval.logs.feedback_records import above_threshold, ipw, split_of
from retrieval.logs.used import used_labels
from retrieval.params import UsedParams

from .systems import run_systems


def bench_name(path: str) -> str:
    """ "hotpotqa/test" for data/judged/hotpotqa/test.jsonl; "scifact-test" for data/benchmarks/scifact-test.jsonl."""
    p = Path(path)
    return p.stem if p.parent.name == "benchmarks" else f"{p.parent.name}/{p.stem}"


def load_items(path: Path, limit: int) -> list[dict]:
    items = []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            items.append(json.loads(line))
            if limit and len(items) >= limit:
                break
    return items


def checked_items(path: Path, max_queries: int = 0) -> list[dict]:
    """A contract-5 file's items, each with a query, its candidates (id, text) and relevant ids, else a ValueError."""
    if not path.is_file():
        raise ValueError(f"{path}: not found")
    items = load_items(path, max_queries)
    for n, it in enumerate(items, 1):
        if not isinstance(it, dict):
            raise ValueError(f"{path}: item {n}: not a JSON object")
        cands = it.get("candidates")
        ok = isinstance(it.get("query"), str) and isinstance(it.get("relevant_ids"), list) and isinstance(cands, list)
        if not ok or not all(isinstance(c, dict) and "id" in c and isinstance(c.get("text"), str) for c in cands):
            raise ValueError(f"{path}: item {n}: needs query, candidates [{{id, text}}] and relevant_ids")
    return items


def feedback_items(
    feedback_dir: Path, val_fraction: float, limit: int, ipw_clip: float = 1.0, *, used: UsedParams
) -> list[dict]:
    """Held-out feedback queries as contract-5 items: the candidates above the threshold (what the selector was
    given), relevant = used as build and train_ranker read it (`retrieval.logs.used.used_labels`, params.yaml
    `used`), each used one with its inverse-propensity weight in `relevant_weights` (`retrieval.logs.feedback_records.ipw`)."""
    items = []
    path = feedback_dir / "feedback.jsonl"
    if not path.exists():
        return items
    for line in open(path, encoding="utf-8"):
        rec = json.loads(line)
        if split_of(rec["query"], val_fraction) != "val":
            continue
        rec = used_labels(rec, used)
        given = above_threshold(rec)
        relevant = [str(c["chunk_id"]) for c in given if c["used"]]
        if not relevant or any(c["text"] is None for c in given):
            continue
        weights = {str(c["chunk_id"]): ipw(c, ipw_clip) for c in given if c["used"]}
        items.append(
            {
                "qid": str(rec["query_id"]),
                "query": rec["query"],
                "relevant_ids": relevant,
                "relevant_weights": weights,
                "answers": [],
                "scope": rec.get("scope"),
                "candidates": [
                    {
                        "id": str(c["chunk_id"]),
                        "title": c["heading"],
                        "parent_heading": c.get("parent_heading"),  # pulled before it: None
                        "text": c["text"],
                        "source": c["source"],
                    }
                    for c in given
                ],
            }
        )
        if limit and len(items) >= limit:
            break
    return items


def log_bank(feedback_dir: Path, embed) -> Bank:
    """The pulled log in `feedback_dir` as a `retrieval.contracts.recalled.Bank` (empty where none was pulled), read
    and embedded once for every set scored against it. `embed(texts)` gives query vectors."""
    path = feedback_dir / "feedback.jsonl"
    records = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()] if path.exists() else []
    return Bank.from_records(records, embed)


def with_recalled(items: list[dict], bank: Bank, embed) -> None:
    """Each candidate's `recalled` evidence: what the log's questions like the item's cited of it (the item's own
    text left out, as the service and train_ranker read it), as the service would read the same log; none from an
    empty bank."""
    vecs = embed([it["query"] for it in items]) if items and bank.texts else [None] * len(items)
    for it, q in zip(items, vecs):
        ids = [str(c["id"]) for c in it["candidates"]]
        evidence = bank.evidence(it["query"], q, ids, it.get("scope")) if q is not None else [()] * len(ids)
        for c, ev in zip(it["candidates"], evidence):
            c["recalled"] = ev


def against_general(path: Path, selector, embedder, rule, bank: Bank, limit: int = 0) -> dict:
    """A judged set's items with a relevant candidate, `selector` against the general baseline: Recall@5 of each and
    the paired difference with its 95 % CI, the selector reading what the log's questions (`bank`: `log_bank`) cited
    for questions like each item (`with_recalled`), as the service reads its own log."""
    items = [it for it in load_items(path, limit) if it.get("relevant_ids")]
    rel = {it["qid"]: set(it["relevant_ids"]) for it in items}
    with_recalled(items, bank, embedder.encode)
    got = run_systems(items, embedder, 5, others={"selector": selector}, rule=rule)
    v, g = (per_query(rel, {q: got[s][q].ids for q in rel})["recall@5"] for s in ("selector", "general"))
    d, lo, hi = paired_bootstrap(v, g, seed=0)
    return {
        "queries": len(items),
        "general": round(float(g.mean()), 4),
        "ranker": round(float(v.mean()), 4),
        "vs_general": {"diff": round(d, 4), "ci95_low": round(lo, 4), "ci95_high": round(hi, 4)},
    }
