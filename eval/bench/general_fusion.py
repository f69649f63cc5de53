"""How much BM25 the learned ranker's *general* weights should carry (`train_ranker.general_bm25`).

Out of the feedback's domain the ranker scores standardised cosine + w x standardised BM25. Which w is
best depends on the domain: where BM25 is strong (HotpotQA: distractors picked by word overlap, the
answer paragraph named in the question) equal weights beat cosine alone by ~0.04; where it is weak
(web-search snippets that all contain the query's words) they lose about as much. One run, side by side
on contract-5 files: the baselines and the fusion at each w, Recall@5 on all queries with the
paired 95 % CI against the best baseline of that file.

    pai lab bench general [--benchmark FILE ...] [--weights 0,0.25,0.5,0.75,1] [--sd-floor 0,0.2] [--plain-floor 1]

`--sd-floor` (train_ranker.bm25_sd_floor): BM25 standardised by max(sd, floor), so candidates that all
contain the query's words (no keyword evidence among them) give the fusion no BM25 weight. `--plain-floor`
(train_ranker.general_plain_floor) adds the per-query floor the ranker's general weights use: the sd floor for
a query naming things, the plain floor for a query in plain words (`--name-ramp`: train_ranker.name_ramp). `--echo-query`
makes a file that case: every candidate starts with the query's text, as web-search snippets contain it.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from eval.systems import BASELINES, baseline_orders
from retrieval.contracts.lexical import bm25_raw, floored
from retrieval.contracts.metrics import paired_bootstrap, recall_at_k
from retrieval.contracts.passage import passage_text
from retrieval.contracts.ranking_features import general_floor, standardise
from retrieval.embed import Embedder


def order(scores: np.ndarray) -> list[int]:
    """Candidate positions by score, ties in the given order."""
    return list(np.argsort(-np.asarray(scores), kind="stable"))


def echo_query(items: list[dict]) -> list[dict]:
    """The items with every candidate's text prefixed by the query (each candidate holds every query word)."""
    return [
        {**it, "candidates": [{**c, "text": f"{it['query']} ... {c['text']}"} for c in it["candidates"]]}
        for it in items
    ]


def fusion_name(w: float, floor: float, plain: float | None = None) -> str:
    if plain is not None:  # the per-query floor: `floor` for a query naming things, `plain` for one in plain words
        return f"cos + {w:g} bm25 (sd floor {floor:g}, plain words {plain:g})"
    return f"cos + {w:g} bm25" + (f" (sd floor {floor:g})" if floor else "")


def system_recalls(
    items: list[dict],
    embedder: Embedder,
    weights: list[float],
    k: int = 5,
    progress=None,
    floors: tuple[float, ...] = (0.0,),
    plains: tuple[float, ...] = (),
    name_ramp: float = 0.2,
) -> dict:
    """Per system, Recall@k per query (arrays aligned with `items`); the baselines are evaluate's own. Each
    plain floor in `plains` adds, per w and floor, the per-query floor the ranker's general weights use
    (`retrieval.contracts.ranking_features.general_floor`: `floor` for a query naming things, the plain one for the rest)."""
    fusions = [(w, f, None) for f in floors for w in weights] + [
        (w, f, p) for p in plains for f in floors for w in weights
    ]
    out: dict[str, list[float]] = {s: [] for s in (*BASELINES, *(fusion_name(*x) for x in fusions))}
    for item in items:
        cands = item["candidates"]
        ids = [c["id"] for c in cands]
        relevant = set(item["relevant_ids"])
        for name, ranked in baseline_orders(embedder, item).items():
            out[name].append(recall_at_k(relevant, ranked, k))
        texts = [passage_text(c.get("title"), c["text"]) for c in cands]  # as the ranker reads them
        cos = standardise(embedder.encode_passages(texts) @ embedder.encode([item["query"]])[0])
        raw = bm25_raw(item["query"], texts)
        for w, f, p in fusions:
            floor = f if p is None else general_floor(item["query"], f, p, name_ramp)
            scores = cos + w * np.asarray(floored(raw, floor))
            out[fusion_name(w, f, p)].append(recall_at_k(relevant, [ids[i] for i in order(scores)], k))
        if progress:
            progress()
    return {s: np.array(v) for s, v in out.items()}


def compare(recalls: dict[str, np.ndarray], seed: int = 0) -> list[dict]:
    """One row per system: mean Recall@5, and the paired difference to the best baseline (of those in `recalls`)
    with its CI."""
    best = max((b for b in BASELINES if b in recalls), key=lambda s: recalls[s].mean())
    rows = []
    for system, r in recalls.items():
        d, lo, hi = paired_bootstrap(r, recalls[best], seed=seed)
        rows.append(
            {
                "system": system,
                "recall@5": round(float(r.mean()), 4),
                "best_baseline": best,
                "diff": round(d, 4),
                "ci95_low": round(lo, 4),
                "ci95_high": round(hi, 4),
            }
        )
    return rows


def run(
    benchmarks: dict[str, list[dict]],
    weights: list[float],
    embedder: Embedder,
    bar=None,
    floors: tuple[float, ...] = (0.0,),
    plains: tuple[float, ...] = (),
    name_ramp: float = 0.2,
) -> dict:
    """`benchmarks`: name -> items (`eval.items.checked_items`)."""
    result = {}
    for name, items in benchmarks.items():
        progress = None
        if bar:
            progress = partial(bar.advance, bar.add_task(f"{name}: {len(items)} queries", total=len(items)))
        recalls = system_recalls(
            items, embedder, weights, progress=progress, floors=floors, plains=plains, name_ramp=name_ramp
        )
        result[name] = {"queries": len(items), "rows": compare(recalls)}
    return result


def table(result: dict, machine: str = ""):
    from rich.table import Table

    t = Table(
        title="General weights: standardised cosine + w x BM25, Recall@5 on all queries (diff vs best baseline)",
        caption=machine,
    )
    for col in ("benchmark", "system", "recall@5", "diff [95 % CI]"):
        t.add_column(col, justify="left" if col in ("benchmark", "system") else "right")
    for bench, r in result.items():
        for row in r["rows"]:
            t.add_row(
                f"{bench} ({r['queries']})",
                row["system"] + (" (best)" if row["system"] == row["best_baseline"] else ""),
                f"{row['recall@5']:.3f}",
                f"{row['diff']:+.3f} [{row['ci95_low']:+.3f}, {row['ci95_high']:+.3f}]",
            )
    return t
