"""Scoring the systems' picks: every system's figures per benchmark, each compared with each baseline and
the champion by a paired bootstrap on Recall@5 (the deploy gate reads those comparisons), and the Recall@k
curve."""

from __future__ import annotations

import numpy as np

from retrieval.chunking import approx_tokens
from retrieval.contracts.metrics import contains_answer, paired_bootstrap, per_query, recall_at_k, weighted_recall_at_k
from retrieval.contracts.selection import Pick

from .base_llm import BASE_SYSTEM
from .systems import BASELINES


def score(items: list[dict], picks: dict[str, dict[str, Pick]], seed: int, ips: bool = False) -> dict:
    """Every system's figures and paired comparisons. `ips`: Recall@5 alone, each relevant id weighed by the
    item's `relevant_weights` (inverse propensities: `weighted_recall_at_k`), the unbiased estimate from labels
    that only what was shown could earn."""
    relevant = {it["qid"]: set(it["relevant_ids"]) for it in items}
    texts = {it["qid"]: {c["id"]: c["text"] for c in it["candidates"]} for it in items}
    weights = {it["qid"]: it.get("relevant_weights") or dict.fromkeys(it["relevant_ids"], 1.0) for it in items}
    all_tokens = float(np.mean([sum(approx_tokens(c["text"]) for c in it["candidates"]) for it in items]))
    table, per = {}, {}
    for system, by_q in picks.items():
        qs = [q for q in relevant if q in by_q]  # the LLM selector may run on the first queries only
        m = per_query({q: relevant[q] for q in qs}, {q: by_q[q].ids for q in qs})
        if ips:
            m = {"recall@5": np.array([weighted_recall_at_k(weights[q], list(by_q[q].ids), 5) for q in qs])}
        per[system] = dict(zip(qs, m["recall@5"]))
        row = {name: round(float(v.mean()), 4) for name, v in m.items()}
        statuses = [p.status for p in by_q.values()]
        secs = [p.seconds * 1000 for p in by_q.values()]
        with_answers = [it for it in items if it.get("answers") and it["qid"] in by_q]
        row.update(
            {
                "queries": len(qs),
                "json_valid": round(sum(s != "fallback" for s in statuses) / len(statuses), 4),
                "fallback": round(statuses.count("fallback") / len(statuses), 4),
                "topped_up": round(sum(p.topped_up > 0 for p in by_q.values()) / len(statuses), 4),
                "latency_p50_ms": round(float(np.percentile(secs, 50)), 2),
                "latency_p95_ms": round(float(np.percentile(secs, 95)), 2),
                "context_tokens": round(
                    float(np.mean([sum(approx_tokens(texts[q][d]) for d in by_q[q].ids) for q in qs])), 1
                ),
                "all_candidates_tokens": round(all_tokens, 1),
                "answer_in_context": round(
                    float(
                        np.mean(
                            [
                                contains_answer([texts[it["qid"]][d] for d in by_q[it["qid"]].ids], it["answers"])
                                for it in with_answers
                            ]
                        )
                    ),
                    4,
                )
                if with_answers
                else None,
            }
        )
        table[system] = row
    versus = {}
    # each system against every baseline, and a model against the champion and the LLM's base model when scored
    refs = (*BASELINES, *(r for r in ("champion", BASE_SYSTEM) if r in per))
    for system in per:
        for base in refs:
            if system != base and not (system in BASELINES and base not in BASELINES):
                common = [q for q in per[system] if q in per[base]]  # paired on the queries both ran
                a, b = (np.array([per[x][q] for q in common]) for x in (system, base))
                d, lo, hi = paired_bootstrap(a, b, seed=seed)
                versus[f"{system}_vs_{base}"] = {
                    "recall@5_diff": round(d, 4),
                    "ci95_low": round(lo, 4),
                    "ci95_high": round(hi, 4),
                }
    return {"systems": table, "paired_bootstrap": versus}


def recall_curve(items: list[dict], picks: dict[str, dict[str, Pick]], benchmark: str, k: int) -> list[dict]:
    rows = []
    for system, by_q in picks.items():
        for kk in range(1, k + 1):
            r = np.mean(
                [recall_at_k(set(it["relevant_ids"]), by_q[it["qid"]].ids, kk) for it in items if it["qid"] in by_q]
            )
            rows.append({"benchmark": benchmark, "system": system, "k": kk, "recall": round(float(r), 4)})
    return rows
