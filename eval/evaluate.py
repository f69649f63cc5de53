"""Stage `evaluate` (and `pai eval`): every system on every benchmark, side by side, in one run.

Systems pick at most k candidates per query: `similarity` (MiniLM cosine order), `bm25` (BM25 as bm25s scores it, over
the query's candidates), `hybrid` (their reciprocal-rank fusion), `selector` (the challenger: the
exported GGUF run exactly as served, Ollama or llama.cpp, through the same contract; unparsable
output falls back to similarity and is counted) and `champion` (the registry's current champion, as
served, when there is one and it is a different model). Benchmarks are contract-5 items: HotpotQA
test (fixed candidates) and the held-out feedback split. Each system is compared with each baseline
and the champion by a paired bootstrap on Recall@5; the deploy gate reads those comparisons.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from retrieval.ce_input import passage_text
from retrieval.chunking import approx_tokens
from retrieval.embed import Embedder, get_embedder
from retrieval.feedback import ipw, shown_candidates, split_of
from retrieval.files import write_atomic
from retrieval.lexical import lexical_scores
from retrieval.metrics import METRICS, contains_answer, paired_bootstrap, per_query, recall_at_k, weighted_recall_at_k
from retrieval.params import BENCHMARK_DIR, SearchParams, load_key, load_section
from retrieval.progress import make_progress
from retrieval.search import rrf
from retrieval.selection import Pick, PromptCandidate, choose, top_up
from retrieval.tracking import use_mlflow
from serving.interface import SelectorLoadError
from serving.selectors import ChatSelector, resolve

from . import promotion
from .promotion import RegistryError, ce_record, folder_record, has_model

BASELINES = ("similarity", "bm25", "hybrid")
FEEDBACK_VAL, FEEDBACK_VAL_IPS = "feedback/val", "feedback/val-ips"  # the held-out feedback: naive, unbiased


@dataclass(frozen=True)
class EvaluateParams:
    benchmarks: str = f"{BENCHMARK_DIR}/hotpotqa/test.jsonl,data/benchmarks/scifact-test.jsonl,data/benchmarks/code-docstrings.jsonl"  # comma-separated contract-5 files
    feedback: str = "data/feedback"  # held-out feedback split (build.val_fraction's val split), when present
    model: str = "models/export"  # the LLM challenger: the export stage's folder (selector.json + GGUF), run as served
    cross_encoder: str = "models/cross_encoder"  # the cross-encoder challenger (train_ce's folder), when present
    ranker: str = "models/ranker"  # the learned ranker challenger (train_ranker's folder), when present
    out: str = "metrics"  # eval.json (DVC metrics), recall_at_k.csv (DVC plot)
    k: int = 5
    max_queries: int = 0  # per benchmark, for the baselines and the fast selectors (ranker, cross-encoder); 0 = all
    llm_max_queries: int = 20  # the first this many of them for the LLM selector (~1 s per query on CPU); 0 = all
    seed: int = 0
    ipw_clip: float = 0.05  # feedback/val-ips: a used label weighs 1 / max(propensity, this); 1 = the naive figure

    def problems(self) -> list[str]:
        ok = self.k >= 1 and self.max_queries >= 0 and self.llm_max_queries >= 0 and 0 < self.ipw_clip <= 1
        return [] if ok else ["evaluate: need k >= 1, max_queries >= 0, llm_max_queries >= 0 and 0 < ipw_clip <= 1"]


def bench_name(path: str) -> str:
    """ "hotpotqa/test" for ../shared/benchmark/hotpotqa/test.jsonl; "scifact-test" for data/benchmarks/scifact-test.jsonl."""
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


def feedback_items(feedback_dir: Path, val_fraction: float, limit: int, ipw_clip: float = 1.0) -> list[dict]:
    """Held-out feedback queries as contract-5 items: the candidates the selector was shown, relevant = used,
    each used one with its inverse-propensity weight in `relevant_weights` (`retrieval.feedback.ipw`)."""
    items = []
    path = feedback_dir / "feedback.jsonl"
    if not path.exists():
        return items
    for line in open(path, encoding="utf-8"):
        rec = json.loads(line)
        shown = shown_candidates(rec)
        used = [str(c["chunk_id"]) for c in shown if c["used"]]
        if split_of(rec["query"], val_fraction) != "val" or not used or any(c["text"] is None for c in shown):
            continue
        weights = {str(c["chunk_id"]): ipw(c, ipw_clip) for c in shown if c["used"]}
        items.append(
            {
                "qid": str(rec["query_id"]),
                "query": rec["query"],
                "relevant_ids": used,
                "relevant_weights": weights,
                "answers": [],
                "candidates": [
                    {
                        "id": str(c["chunk_id"]),
                        "title": c["heading"],
                        "parent_heading": c.get("parent_heading"),  # pulled before it: None
                        "text": c["text"],
                        "source": c["source"],
                    }
                    for c in shown
                ],
            }
        )
        if limit and len(items) >= limit:
            break
    return items


def similarity_ranking(embedder: Embedder, item: dict) -> list[str]:
    cands = item["candidates"]
    q = embedder.encode([item["query"]])[0]
    vecs = embedder.encode_passages([passage_text(c.get("title"), c["text"], c.get("parent_heading")) for c in cands])
    order = np.argsort(-(vecs @ q), kind="stable")
    return [cands[i]["id"] for i in order]


def passage_texts(items: list[dict]) -> list[str]:
    """The distinct candidate passages of a benchmark, as the systems embed them, shortest first."""
    return sorted(
        {passage_text(c.get("title"), c["text"], c.get("parent_heading")) for it in items for c in it["candidates"]},
        key=len,
    )


def prefill_vectors(embedder: Embedder, texts: list[str], advance=None, step: int = 256) -> None:
    """Embed passages once, up front, into the vector cache every system reads, in full batches of similar
    length (a query's own 10-20 passages padded to their longest embed slower; a fresh machine embeds
    HotpotQA's 5,000 paragraphs here). `advance()` once per passage."""
    for i in range(0, len(texts), step):
        batch = texts[i : i + step]
        embedder.encode_passages(batch)
        if advance:
            for _ in batch:
                advance()


def bm25_ranking(item: dict) -> list[str]:
    """The candidates by BM25 of the query (`retrieval.lexical.lexical_scores`: bm25s's scores)."""
    cands = item["candidates"]
    scores = lexical_scores(item["query"], [f"{c.get('title') or ''} {c['text']}" for c in cands])
    return [cands[i]["id"] for i in np.argsort(-np.asarray(scores), kind="stable")]


def selector_pick(selector, item: dict, sim_order: list[str], k: int, floor: int = 0) -> Pick:
    """The selector sees the candidates in similarity order (as retrieval hands them over); its pick is
    topped up to `floor` from that order, as the service does (`retrieval.selection.top_up`)."""
    by_id = {c["id"]: c for c in item["candidates"]}
    shown = [by_id[i] for i in sim_order]
    cands = [
        PromptCandidate(
            c.get("source") or c.get("title") or c["id"], c.get("title"), c["text"], c.get("parent_heading")
        )
        for c in shown
    ]
    t0 = time.perf_counter()
    sel, _ = choose(lambda: selector.answer(item["query"], cands, k), len(shown), k)  # the service's path
    full = top_up(sel.selected, len(shown), floor)
    return Pick(
        tuple(shown[i - 1]["id"] for i in full),
        sel.status,
        time.perf_counter() - t0,
        topped_up=len(full) - len(sel.selected),
    )


def run_systems(
    items: list[dict],
    embedder: Embedder,
    k: int,
    selector=None,
    progress: Callable[[], None] = lambda: None,
    champion=None,
    others: dict | None = None,
    llm_max_queries: int = 0,
    floor: int = 0,
) -> dict[str, dict]:
    """Every system's picks per query; `selector` and `others` (name -> selector) are challengers. An LLM
    (a `ChatSelector`, ~1 s a query on CPU) answers the first `llm_max_queries` queries only (0 = all)."""
    models = {
        name: sel
        for name, sel in (("selector", selector), *(others or {}).items(), ("champion", champion))
        if sel is not None
    }
    if isinstance(champion, str):  # the champion is one of the challengers: same picks, not run twice
        del models["champion"]
    picks: dict[str, dict[str, Pick]] = {s: {} for s in (*BASELINES, *models)}
    for n, item in enumerate(items):
        q = item["qid"]
        t0 = time.perf_counter()
        sim = similarity_ranking(embedder, item)
        picks["similarity"][q] = Pick(tuple(sim[:k]), seconds=time.perf_counter() - t0)
        t0 = time.perf_counter()
        bm = bm25_ranking(item)
        picks["bm25"][q] = Pick(tuple(bm[:k]), seconds=time.perf_counter() - t0)
        picks["hybrid"][q] = Pick(tuple(rrf([sim, bm], 60)[:k]))
        for name, sel in models.items():
            if not isinstance(sel, ChatSelector) or not llm_max_queries or n < llm_max_queries:
                picks[name][q] = selector_pick(sel, item, sim, k, floor)
        if isinstance(champion, str) and q in picks[champion]:
            picks.setdefault("champion", {})[q] = picks[champion][q]
        progress()
    return picks


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
    for system in per:
        for base in (*BASELINES, *(["champion"] if "champion" in per else [])):
            if system != base and not (system in BASELINES and base == "champion"):
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


def evaluate(
    p: EvaluateParams,
    embedder: Embedder,
    selector,
    progress_factory=None,
    champion=None,
    others: dict | None = None,
    floor: int = SearchParams().min_chunks,
    *,
    val_fraction: float,
) -> tuple[dict, list[dict]]:
    """Every benchmark's table; a selector's pick is topped up to `floor` (search.min_chunks), as served.
    The held-out feedback is the val split of `val_fraction` (build.val_fraction: build's split, exactly)."""
    benches = {bench_name(b): load_items(Path(b), p.max_queries) for b in p.benchmarks.split(",") if b}
    held_out = feedback_items(Path(p.feedback), val_fraction, p.max_queries, p.ipw_clip)
    if held_out:
        benches[FEEDBACK_VAL] = held_out
    result, curve = {}, []
    for name, all_items in benches.items():
        # a query with no relevant candidate (MS MARCO has unanswerable ones) has no recall: skipped, counted
        items = [it for it in all_items if it.get("relevant_ids")]
        if not items:
            continue
        texts = passage_texts(items)
        prefill_vectors(
            embedder, texts, progress_factory(f"{name}: passage vectors", len(texts)) if progress_factory else None
        )
        advance = progress_factory(name, len(items)) if progress_factory else (lambda: None)
        picks = run_systems(items, embedder, p.k, selector, advance, champion, others, p.llm_max_queries, floor)
        result[name] = score(items, picks, p.seed)
        if name == FEEDBACK_VAL:  # beside the naive figure, the unbiased one the gate reads
            result[FEEDBACK_VAL_IPS] = score(items, picks, p.seed, ips=True)
        if len(items) < len(all_items):
            result[name]["skipped_no_relevant"] = len(all_items) - len(items)
        curve += recall_curve(items, picks, name, p.k)
    return result, curve


def main() -> None:
    p = load_section("params.yaml", "evaluate", EvaluateParams)
    val_fraction = load_key("params.yaml", "build", "val_fraction", float)  # build's split (BuildParams is training's)
    console = Console(stderr=True)
    record_path = Path(p.model) / "selector.json"
    selector = resolve(p.model) if record_path.exists() else None
    others, challengers = {}, {"selector": json.loads(record_path.read_text())} if selector else {}
    if has_model("cross_encoder", Path(p.cross_encoder)):
        challengers["cross_encoder"] = ce_record(Path(p.cross_encoder))  # hashes the model folder: once
        others["cross_encoder"] = resolve(challengers["cross_encoder"])
    if has_model("ranker", Path(p.ranker)):
        challengers["ranker"] = folder_record("ranker", Path(p.ranker))
        others["ranker"] = resolve(challengers["ranker"])
    champion = load_champion(challengers, console)
    console.print(
        f"evaluate: challengers {', '.join(s.version for s in [selector, *others.values()] if s) or 'none'}; "
        f"champion {champion if isinstance(champion, str) else getattr(champion, 'version', 'none')}"
    )
    with make_progress(*Progress.get_default_columns(), console=console) as bar:
        result, curve = evaluate(
            p,
            get_embedder(),
            selector,
            lambda name, n: lambda t=bar.add_task(name, total=n): bar.advance(t),
            champion,
            others,
            load_section("params.yaml", "search", SearchParams).min_chunks,
            val_fraction=val_fraction,
        )
    out = Path(p.out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "eval.json", json.dumps(result, indent=2) + "\n")
    write_atomic(
        out / "recall_at_k.csv",
        "benchmark,system,k,recall\n"
        + "".join(f"{r['benchmark']},{r['system']},{r['k']},{r['recall']}\n" for r in curve),
    )
    if selector is not None:
        log_to_mlflow(json.loads(record_path.read_text()).get("train_run_id"), result)
    print_table(result, console)


def load_champion(challengers: dict[str, dict], console):
    """The registry's champion as served; the name of the challenger system when it is that very
    model (not run twice); None without one. A registry or model that cannot be reached is
    reported and evaluation goes on without it."""

    def identity(r: dict) -> str | None:
        return r.get("gguf_sha256") or r.get("model_sha256")

    try:
        record = promotion.champion()
        if record is None:
            return None
        same = [name for name, c in challengers.items() if identity(c) and identity(c) == identity(record)]
        if same:
            return same[0]
        return resolve(record)
    except (RegistryError, SelectorLoadError) as e:
        console.print(f"[yellow]evaluate: no champion baseline:[/yellow] {e}", soft_wrap=True)
        return None


def log_to_mlflow(run_id: str | None, result: dict) -> None:
    mlflow = use_mlflow()
    with mlflow.start_run(run_id=run_id) if run_id else mlflow.start_run(run_name="evaluate"):
        for bench, r in result.items():
            for system, row in r["systems"].items():
                mlflow.log_metrics(
                    {
                        f"{bench}/{system}/{m}".replace("@", "_at_"): row[m]
                        for m in (*METRICS, "json_valid", "fallback")
                        if m in row  # feedback/val-ips has Recall@5 alone
                    }
                )


def print_table(result: dict, console) -> None:
    for bench, r in result.items():
        t = Table(title=f"{bench}: {next(iter(r['systems'].values()))['queries']} queries")
        cols = [*METRICS, "json_valid", "answer_in_context", "latency_p50_ms", "context_tokens"]
        t.add_column("system")
        for c in cols:
            t.add_column(c, justify="right")
        for system, row in r["systems"].items():
            t.add_row(system, *[str(row.get(c, "-")) for c in cols])
        console.print(t)
        if r.get("skipped_no_relevant"):
            console.print(f"  skipped {r['skipped_no_relevant']} queries with no relevant candidate")
        for name, v in r["paired_bootstrap"].items():
            if name.startswith(("selector", "champion", "cross_encoder", "ranker")):
                console.print(
                    f"  {name}: recall@5 {v['recall@5_diff']:+.4f} [{v['ci95_low']:+.4f}, {v['ci95_high']:+.4f}]"
                )


if __name__ == "__main__":
    main()
