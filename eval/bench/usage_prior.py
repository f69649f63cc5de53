"""`pai lab bench usage`: does the usage prior (maintain.usage_prior) help, and whom does it hurt?

On a store holding the SciFact corpus and its train queries replayed as feedback (`pai lab simulate`),
the weights come from that log; a held-out query whose text is in the log (SciFact repeats two test
claims in train) is left out of the held-out set. Then, with and without the prior, at each bound:
1. held-out (test) Recall@5, nDCG@10 and first-stage Recall@20 of hybrid search, as served;
2. train Recall@5 (in-sample: what the prior does where it was fitted);
3. fresh documents: each held-out query's relevant documents are re-inserted under a new source
   (same text and embedding, new chunk ids, so no usage yet) and the old ones removed; the same
   metrics say whether a newcomer still reaches the top 5 beside chunks that earned weight.
Everything runs in one transaction that is rolled back: the store is left as it was.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
from rich.table import Table

from eval.retrieval_eval import doc_ids, load_scifact
from retrieval.contracts.metrics import ndcg_at_k, paired_bootstrap, recall_at_k
from retrieval.corpus.sources import resolved
from retrieval.embed import Embedder
from retrieval.logs.feedback_records import normalize_query
from retrieval.ops import usage
from retrieval.params import MaintainParams, SearchParams
from retrieval.query.search import search_vector


def run(
    conn: psycopg.Connection,
    embedder: Embedder,
    benchmark_dir: Path,
    split: str,
    sp: SearchParams,
    mp: MaintainParams,
    bounds: list[float],
    bar,
) -> dict:
    corpus = resolved(benchmark_dir / "scifact" / "corpus.jsonl")
    held_out, train = load_scifact(benchmark_dir, split), load_scifact(benchmark_dir, "train")
    _check_store(conn, corpus)
    logged = _logged(conn, held_out)  # SciFact repeats a few claims across splits: those are not held out
    held_out = [q for q in held_out if normalize_query(q[1]) not in logged]
    if not held_out:
        raise ValueError(f"every {split} query is in the feedback log: nothing is held out")
    weights = {b: usage.from_log(conn, mp.usage_strength, b) for b in bounds}
    vecs = {s: embedder.encode([q for _, q, _ in qs]) for s, qs in (("held_out", held_out), ("train", train))}
    task = bar.add_task("usage prior: search", total=(1 + len(bounds)) * (2 * len(held_out) + len(train)))
    systems: dict[str, dict] = {}
    with conn.transaction(force_rollback=True):  # nothing the bench writes stays
        for b in [None, *bounds]:
            _set_weights(conn, weights[b] if b is not None else {})
            name = "no prior" if b is None else f"prior, bound {b:g}"
            systems[name] = {
                "held_out": _measure(conn, held_out, vecs["held_out"], sp, b is not None, bar, task),
                "train": _measure(conn, train, vecs["train"], sp, b is not None, bar, task),
            }
        n_fresh = _make_fresh(conn, corpus, set().union(*(r for _, _, r in held_out)))
        for b in [None, *bounds]:
            _set_weights(conn, weights[b] if b is not None else {})
            name = "no prior" if b is None else f"prior, bound {b:g}"
            systems[name]["fresh"] = _measure(conn, held_out, vecs["held_out"], sp, b is not None, bar, task)
    base = systems["no prior"]
    rows = []
    for name, m in systems.items():
        row = {"system": name}
        for part in ("held_out", "train", "fresh"):
            for metric in ("recall@5", "recall@20", "ndcg@10"):
                row[f"{part}_{metric}"] = round(float(np.mean(m[part][metric])), 4)
            row[f"{part}_rank"] = round(float(np.mean(m[part]["rank"])), 2)
            if name != "no prior":
                d, lo, hi = paired_bootstrap(m[part]["recall@5"], base[part]["recall@5"])
                row[f"{part}_delta_recall@5"] = [round(d, 4), round(lo, 4), round(hi, 4)]
        rows.append(row)
    return {
        "split": split,
        "queries": {"held_out": len(held_out), "train": len(train), "held_out_excluded_in_log": len(logged)},
        "fresh_documents": n_fresh,
        "usage_strength": mp.usage_strength,
        "weighted_chunks": {f"{b:g}": _weight_counts(weights[b]) for b in bounds},
        "rows": rows,
    }


def _check_store(conn, corpus: str) -> None:
    (docs,) = conn.execute("SELECT count(*) FROM documents WHERE path = %s", (corpus,)).fetchone()
    if docs == 0:
        raise ValueError(
            f"no SciFact documents from {corpus} in the store: run `pai lab simulate --dataset scifact` first"
        )
    (labelled,) = conn.execute("SELECT count(*) FROM query_candidates WHERE used IS NOT NULL").fetchone()
    if labelled == 0:
        raise ValueError("the feedback log has no used/ignored labels: run `pai lab simulate --dataset scifact` first")


def _logged(conn, queries) -> set[str]:
    """The normalised texts of `queries` that the feedback log holds."""
    texts = {normalize_query(q) for _, q, _ in queries}
    return {normalize_query(t) for (t,) in conn.execute("SELECT DISTINCT text FROM queries")} & texts


def _set_weights(conn, weights: dict[int, usage.Usage]) -> None:
    conn.execute("DELETE FROM chunk_usage")
    usage.write(conn, weights, [])


def _make_fresh(conn, corpus: str, doc_ids_: set[str]) -> int:
    """Re-insert these documents under new sources ("fresh:" + source: same corpus id, same text
    and embedding, new chunk ids without usage) and delete the old ones; return how many."""
    old = [
        i
        for (i,) in conn.execute(
            "SELECT id FROM documents WHERE path = %s AND split_part(source, '#', -1) = ANY(%s)",
            (corpus, list(doc_ids_)),
        )
    ]
    conn.execute(
        "INSERT INTO documents (source, path, content_hash, n_chunks)"
        " SELECT 'fresh:' || source, path, content_hash, n_chunks FROM documents WHERE id = ANY(%s)",
        (old,),
    )
    conn.execute(
        """INSERT INTO chunks (document_id, source, ord, heading, parent_heading, level, start_line, end_line,
                               text, content_hash, tokens, embedding)
           SELECT n.id, n.source, c.ord, c.heading, c.parent_heading, c.level, c.start_line, c.end_line,
                  c.text, c.content_hash, c.tokens, c.embedding
           FROM documents o JOIN documents n ON n.source = 'fresh:' || o.source JOIN chunks c ON c.document_id = o.id
           WHERE o.id = ANY(%s)""",
        (old,),
    )
    conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (old,))
    return len(old)


def _measure(conn, queries, qvecs, sp: SearchParams, usage_on: bool, bar, task) -> dict[str, np.ndarray]:
    out: dict[str, list[float]] = {"recall@5": [], "recall@20": [], "ndcg@10": [], "rank": []}
    for (_, text, relevant), v in zip(queries, qvecs):
        ranked = doc_ids([c.source for c in search_vector(conn, text, v, sp, usage=usage_on).candidates])
        out["recall@5"].append(recall_at_k(relevant, ranked, 5))
        out["recall@20"].append(recall_at_k(relevant, ranked, 20))
        out["ndcg@10"].append(ndcg_at_k(relevant, ranked, 10))
        # rank of the first relevant document (len + 1 when none is among the candidates)
        out["rank"].append(next((i for i, d in enumerate(ranked, start=1) if d in relevant), len(ranked) + 1))
        bar.advance(task)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def _weight_counts(weights: dict[int, usage.Usage]) -> dict:
    w = np.array([u.weight for u in weights.values()]) if weights else np.zeros(0)
    return {
        "chunks": len(w),
        "up": int((w > 0).sum()),
        "down": int((w < 0).sum()),
        "max": round(float(w.max(initial=0)), 4),
        "min": round(float(w.min(initial=0)), 4),
    }


def table(result: dict) -> Table:
    t = Table(
        title=f"usage prior on SciFact ({result['queries']['held_out']} {result['split']} queries held out, "
        f"{result['queries']['train']} train queries replayed; {result['fresh_documents']} documents made fresh)"
    )
    for col in (
        "system",
        "held-out R@5",
        "Δ R@5 [95% CI]",
        "R@20",
        "nDCG@10",
        "train R@5 (in-sample)",
        "fresh R@5",
        "fresh Δ R@5 [95% CI]",
        "fresh rank",
    ):
        t.add_column(col, justify="right")

    def delta(r, part):
        d = r.get(f"{part}_delta_recall@5")
        return f"{d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}]" if d else "-"

    for r in result["rows"]:
        t.add_row(
            r["system"],
            f"{r['held_out_recall@5']:.4f}",
            delta(r, "held_out"),
            f"{r['held_out_recall@20']:.4f}",
            f"{r['held_out_ndcg@10']:.4f}",
            f"{r['train_recall@5']:.4f}",
            f"{r['fresh_recall@5']:.4f}",
            delta(r, "fresh"),
            f"{r['fresh_rank']:.2f}",
        )
    return t
