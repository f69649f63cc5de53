"""Day one: the orders a store serves before any feedback, per domain, against plain vector search
(`pai lab bench general --domains DIR_OR_FILES`).

Per domain (a contract-5 file, `pai lab bench build-domains`), Recall@5 over each query's candidates of: cosine,
BM25, hybrid (reciprocal-rank fusion of the two, the first stage's order before `search.fusion: general`), the
first stage replayed (RRF's top_k of the candidates, then ordered as `retrieval.query.order.fused_order` orders
them) and the general order (`retrieval.fusion.general_scores`, the ranker's general weights), each with the
paired 95 % bootstrap CI against the best of cosine, BM25 and hybrid.

The general order's numbers are shipped in params.yaml; the bench also fits them **leave-one-domain-out**: for each
domain, the grid point that does best on the *other* domains (the largest worst-domain difference to their best
baseline, then the largest mean) is scored on it, so no domain's taste is baked into its own row. The rule shipped
before the rare-word share (`BEFORE`) is scored beside it, and the shipped rule paired against it.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict

import numpy as np

from eval.bench.general_fusion import order
from retrieval.contracts.metrics import paired_bootstrap, recall_at_k
from retrieval.contracts.passage import passage_text
from retrieval.embed import Embedder
from retrieval.fusion import GeneralRule, bm25_raw, combined
from retrieval.query.order import rrf

BASELINES = ("cosine", "bm25", "hybrid")
BEFORE = GeneralRule(plain_floor=1.0, rare_ramp=0.0)  # the general order before the rare-word share (a43fc54)
# the LODO fit's grid (rare_ramp 0: words outside the embedder's vocabulary not read, the rule before)
GRID = {
    "bm25_weight": (0.5, 1.0),
    "names_floor": (0.2, 0.5),
    "plain_floor": (0.5, 1.0, 2.0),
    "rare_ramp": (0.0, 0.3, 0.5),
}


def prepared(items: list[dict], embedder: Embedder, progress=None) -> list[dict]:
    """Per query: the candidates' cosines and raw BM25 (texts as the ranker reads them) and which are relevant."""
    out = []
    for it in items:
        cands = it["candidates"]
        texts = [passage_text(c.get("title"), c["text"], c.get("parent_heading")) for c in cands]
        q = embedder.encode([it["query"]])[0]
        relevant = set(it["relevant_ids"])
        out.append(
            {
                "query": it["query"],
                "ids": [c["id"] for c in cands],
                "relevant": relevant,
                "cos": embedder.encode_passages(texts) @ q,
                "bm25": bm25_raw(it["query"], texts),
            }
        )
        if progress:
            progress()
    return out


def recalls(rows: list[dict], scores, k: int = 5) -> np.ndarray:
    """Recall@k per query of the order `scores(row)` gives (positions by score, ties in the given order)."""
    return np.array([recall_at_k(r["relevant"], [r["ids"][i] for i in order(scores(r))], k) for r in rows])


def first_stage(r: dict, rule: GeneralRule, top_k: int = 20) -> np.ndarray:
    """The first stage replayed on the candidates: RRF's top_k of the cosine and BM25 rankings, ordered by the
    general order (candidates RRF leaves out last)."""
    fused = rrf([order(r["cos"]), order(r["bm25"])], 60)[:top_k]
    g = combined(r["query"], r["cos"][fused], r["bm25"][fused], rule)
    out = np.full(len(r["ids"]), -np.inf)
    out[fused] = g
    return out


def baselines(rows: list[dict]) -> dict[str, np.ndarray]:
    def hybrid(r):
        fused = rrf([order(r["cos"]), order(r["bm25"])], 60)
        s = np.zeros(len(r["ids"]))
        s[fused] = -np.arange(len(fused), dtype=np.float64)
        return s

    return {
        "cosine": recalls(rows, lambda r: r["cos"]),
        "bm25": recalls(rows, lambda r: r["bm25"]),
        "hybrid": recalls(rows, hybrid),
    }


def general(rows: list[dict], rule: GeneralRule) -> np.ndarray:
    return recalls(rows, lambda r: combined(r["query"], r["cos"], r["bm25"], rule))


def grid() -> list[GeneralRule]:
    return [GeneralRule(**dict(zip(GRID, v)), name_ramp=0.2) for v in itertools.product(*GRID.values())]


def fit_lodo(domains: dict[str, list[dict]], base: dict[str, dict[str, np.ndarray]]) -> dict[str, GeneralRule]:
    """Per domain, the grid's rule fitted on the other domains: the best worst-domain difference to their best
    baseline, then the best mean."""
    rules = grid()
    diffs = {
        d: [general(rows, g).mean() - max(v.mean() for v in base[d].values()) for g in rules]
        for d, rows in domains.items()
    }
    fitted = {}
    for d in domains:
        others = [o for o in domains if o != d] or [d]
        score = [(min(diffs[o][n] for o in others), np.mean([diffs[o][n] for o in others])) for n in range(len(rules))]
        fitted[d] = rules[max(range(len(rules)), key=lambda n: score[n])]
    return fitted


def row(system: str, r: np.ndarray, best: np.ndarray, seed: int, before: np.ndarray | None = None) -> dict:
    d, lo, hi = paired_bootstrap(r, best, seed=seed)
    out = {
        "system": system,
        "recall@5": round(float(r.mean()), 4),
        "diff": round(d, 4),
        "ci95": [round(lo, 4), round(hi, 4)],
    }
    if before is not None:  # paired against the rule before, on the same queries
        d, lo, hi = paired_bootstrap(r, before, seed=seed)
        out["vs_before"] = [round(d, 4), round(lo, 4), round(hi, 4)]
    return out


def run(domains: dict[str, list[dict]], embedder: Embedder, shipped: GeneralRule, bar=None, seed: int = 0) -> dict:
    """`domains`: name -> contract-5 items. Per domain its rows (systems, Recall@5, paired CI vs the best baseline)."""
    prepped = {}
    for name, items in domains.items():
        task = bar.add_task(f"{name}: {len(items)} queries", total=len(items)) if bar else None
        prepped[name] = prepared(items, embedder, (lambda t=task: bar.advance(t)) if bar else None)
    base = {d: baselines(rows) for d, rows in prepped.items()}
    fitted = fit_lodo(prepped, base)
    result = {}
    for d, rows in prepped.items():
        best = max(BASELINES, key=lambda s: base[d][s].mean())
        systems = dict(base[d])
        systems["first stage (shipped rule)"] = recalls(rows, lambda r: first_stage(r, shipped))
        systems["general order (shipped rule)"] = general(rows, shipped)
        systems["general order (fitted without this domain)"] = general(rows, fitted[d])
        systems["general order (rule before)"] = before = general(rows, BEFORE)
        result[d] = {
            "queries": len(rows),
            "best_baseline": best,
            "fitted_rule": asdict(fitted[d]),
            "rows": [
                row(s, r, base[d][best], seed, before if "shipped" in s or "fitted" in s else None)
                for s, r in systems.items()
            ],
        }
    return {"shipped_rule": asdict(shipped), "rule_before": asdict(BEFORE), "domains": result}


def table(result: dict, machine: str = ""):
    from rich.table import Table

    t = Table(
        title="Day one: Recall@5 per domain (diff vs the best of cosine, BM25, hybrid; paired 95 % CI)", caption=machine
    )
    for col in ("domain", "system", "recall@5", "diff [95 % CI]", "vs the rule before"):
        t.add_column(col, justify="left" if col in ("domain", "system") else "right")
    for d, r in result["domains"].items():
        for x in r["rows"]:
            name = x["system"] + (" (best)" if x["system"] == r["best_baseline"] else "")
            lo, hi = x["ci95"]
            vs = "{:+.3f} [{:+.3f}, {:+.3f}]".format(*x["vs_before"]) if "vs_before" in x else ""
            t.add_row(
                f"{d} ({r['queries']})", name, f"{x['recall@5']:.3f}", f"{x['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]", vs
            )
    return t
