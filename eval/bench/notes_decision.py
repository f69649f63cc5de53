"""`python -m eval.bench.notes_decision PAI_HOME`: the judged split scores a trial's decision afterwards. In a store of
SciFact's corpus as notes (`pai lab notes`), the SciFact test claims' candidates come from the store's own first
stage; Recall@5 of the first-stage order (the champion before the first promotion), the baselines and the ranker
the trial promoted or rejected (the newest model under PAI_HOME/selectors), with paired 95 % CIs. Run it in the
project the store's pipeline ran in (`eval/bench/user_path.sh` does)."""

from __future__ import annotations

import sys
from pathlib import Path

from eval.retrieval_eval import doc_ids, load_scifact
from eval.systems import run_systems
from retrieval.contracts.metrics import paired_bootstrap, per_query
from retrieval.db import connect, pai_home
from retrieval.embed import get_embedder
from retrieval.params import SearchParams, load_section
from retrieval.query.search import search_vector
from serving.selectors import resolve


def score(home: Path, benchmark_dir: Path = Path("data/judged")) -> dict:
    model = max((home / "selectors").iterdir(), key=lambda p: p.stat().st_mtime)
    sp = load_section("params.yaml", "search", SearchParams)
    emb = get_embedder()
    queries = load_scifact(benchmark_dir, "test")
    items = []
    with connect() as conn:
        for qid, text, rel in queries:
            cands = search_vector(conn, text, emb.encode([text])[0], sp).above
            relevant = [str(c.chunk_id) for c in cands if doc_ids([c.source])[0] in rel]
            if relevant:
                items.append(
                    {
                        "qid": qid,
                        "query": text,
                        "relevant_ids": relevant,
                        "candidates": [
                            {"id": str(c.chunk_id), "title": c.heading, "text": c.text, "source": c.source}
                            for c in cands
                        ],
                    }
                )
    picks = run_systems(items, emb, 5, others={"ranker": resolve(model)})
    rel = {it["qid"]: set(it["relevant_ids"]) for it in items}
    recall = {s: per_query(rel, {q: picks[s][q].ids for q in rel})["recall@5"] for s in picks}
    recall["first-stage order"] = per_query(rel, {it["qid"]: [c["id"] for c in it["candidates"]] for it in items})[
        "recall@5"
    ]
    out = {
        "claims": len(items),
        "of": len(queries),
        "recall@5": {s: round(float(v.mean()), 4) for s, v in recall.items()},
    }
    for ref in ("first-stage order", "cosine", "hybrid"):
        d, lo, hi = paired_bootstrap(recall["ranker"], recall[ref])
        out[f"ranker_vs_{ref}"] = [round(d, 4), round(lo, 4), round(hi, 4)]
    return out


def main() -> None:
    out = score(Path(sys.argv[1]) if len(sys.argv) > 1 else pai_home())
    print(f"{out['claims']} of {out['of']} SciFact test claims have a relevant note among their candidates")
    for system, r in out["recall@5"].items():
        print(f"  {system}: Recall@5 {r}")
    for k, (d, lo, hi) in ((k, v) for k, v in out.items() if k.startswith("ranker_vs_")):
        print(f"  {k}: {d:+.4f} [{lo:+.4f}, {hi:+.4f}]")


if __name__ == "__main__":
    main()
