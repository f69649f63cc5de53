"""The systems the evaluation compares, run on the same items: the baselines (`BASELINE_TABLE`, the one list
eval, the gate, the CLI and the benches read), and the selectors (the challengers and the champion) run exactly
as served, through the same contract: unparsable output falls back to the order they were handed and is counted, a pick is
topped up to the context's floor."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.contracts.lexical import lexical_scores
from retrieval.contracts.passage import passage_text
from retrieval.contracts.selection import Pick, PromptCandidate, choose, top_up
from retrieval.embed import Embedder
from retrieval.fusion import GeneralRule, general_order
from retrieval.query.order import rrf
from serving.llm_selectors import ChatSelector


class Candidates:
    """One item's candidates as the baselines read them: their passage texts, and their cosines to the query,
    embedded once on first use however many baselines read them."""

    def __init__(self, embedder: Embedder, item: dict):
        self.embedder, self.item = embedder, item
        self.ids = [c["id"] for c in item["candidates"]]

    @functools.cached_property
    def texts(self) -> list[str]:
        return [passage_text(c.get("title"), c["text"], c.get("parent_heading")) for c in self.item["candidates"]]

    @functools.cached_property
    def cosines(self) -> np.ndarray:
        return self.embedder.encode_passages(self.texts) @ self.embedder.encode([self.item["query"]])[0]

    def ranked(self, positions) -> list[str]:
        return [self.ids[i] for i in positions]


@dataclass(frozen=True)
class Baseline:
    """A system every challenger is compared with, one that learns nothing: its `name` (in eval.json, the MLflow
    metrics, `pai eval`, the benches), what it is, and its order of an item's candidates: `order(cands, before,
    rule)`, where `before` holds the orders of the baselines listed above it for the same item. Every baseline is
    a reference of the deploy gate: a challenger must beat the best of them (eval/gate.py), except that a
    `first_stage` one is no reference on the held-out feedback, which was logged through it."""

    name: str
    what: str
    order: Callable[[Candidates, dict[str, list[str]], GeneralRule], list[str]]
    first_stage: bool = False
    """the order the service serves without a ranker: the feedback log's labels come from its top 5 (and the few
    explored chunks), so graded on them it wins by construction"""


def _cosine_order(c: Candidates) -> list[str]:
    return c.ranked(np.argsort(-c.cosines, kind="stable"))


def _general_order(c: Candidates, rule: GeneralRule) -> list[str]:
    """The first stage's general order (`retrieval.fusion`: standardised cosine, and BM25 as far as its evidence
    goes), the texts as the ranker and `cosine` read them."""
    return c.ranked(general_order(c.item["query"], c.cosines, c.texts, rule))


BASELINE_TABLE = (
    Baseline("cosine", "MiniLM cosine order", lambda c, before, rule: _cosine_order(c)),
    Baseline("bm25", "BM25 over the query's candidates (bm25s)", lambda c, before, rule: bm25_ranking(c.item)),
    Baseline(
        "hybrid",
        "cosine and bm25 by reciprocal rank (k 60)",
        lambda c, before, rule: rrf([before["cosine"], before["bm25"]], 60),
    ),
    Baseline(
        "general",
        "the first stage's order (search.fusion general): what serves without a ranker",
        lambda c, before, rule: _general_order(c, rule),
        first_stage=True,
    ),
)
BASELINES = tuple(b.name for b in BASELINE_TABLE)
FIRST_STAGE = tuple(b.name for b in BASELINE_TABLE if b.first_stage)
OLD_NAMES = {"similarity": "cosine"}  # baselines renamed (issue 59): in results written before, read as named now


def current_name(name: str) -> str:
    """A system's name as named now, and a pair's (`a_vs_b`, the paired bootstrap's keys) with each side's."""
    return "_vs_".join(OLD_NAMES.get(part, part) for part in name.split("_vs_"))


def current_result(result: dict) -> dict:
    """An evaluate result (eval.json, eval-llm.json) as named now: each benchmark's `systems` and `paired_bootstrap`
    keyed by the systems' current names, so a result written before a baseline was renamed still gates."""
    return {
        bench: r | {k: {current_name(n): v for n, v in r[k].items()} for k in ("systems", "paired_bootstrap") if k in r}
        for bench, r in result.items()
    }


def baseline_orders(
    embedder: Embedder, item: dict, rule: GeneralRule = GeneralRule(), seconds: dict[str, float] | None = None
) -> dict[str, list[str]]:
    """Every baseline's full order of `item`'s candidates, in the table's order; each one's time into `seconds`
    (the first to read the cosines pays for embedding them)."""
    cands, out = Candidates(embedder, item), {}
    for b in BASELINE_TABLE:
        t0 = time.perf_counter()
        out[b.name] = b.order(cands, out, rule)
        if seconds is not None:
            seconds[b.name] = time.perf_counter() - t0
    return out


def general_ranking(embedder: Embedder, item: dict, rule: GeneralRule = GeneralRule()) -> list[str]:
    """The candidates in the first stage's general order under `rule`."""
    return _general_order(Candidates(embedder, item), rule)


# Two chains gate apart (dvc.yaml): the ranker's (evaluate -> deploy) never waits for the GGUF; the LLM's
# (evaluate_llm -> deploy_llm) runs after it, against the champion the ranker's chain left.
CHAINS = ("ranker", "llm")


def chain_arg(argv: list[str] | None, stage: str) -> str:
    """The chain a stage's command line names (`python -m eval.STAGE [ranker|llm]`, ranker when none); any
    other word is one error line and exit status 2."""
    args = sys.argv[1:] if argv is None else argv
    chain = args[0] if args else "ranker"
    if chain not in CHAINS:
        print(f"{stage}: chain {chain!r}: one of {', '.join(CHAINS)}", file=sys.stderr)
        raise SystemExit(2)
    return chain


def chain_file(path: str | Path, chain: str) -> Path:
    """A chain's result file: `metrics/eval.json` is the ranker's chain, `metrics/eval-llm.json` the LLM's."""
    if chain not in CHAINS:
        raise ValueError(f"chain {chain!r}: one of {', '.join(CHAINS)}")
    p = Path(path)
    return p if chain == "ranker" else p.with_name(f"{p.stem}-{chain}{p.suffix}")


def cosine_ranking(embedder: Embedder, item: dict) -> list[str]:
    """The candidates by MiniLM cosine to the query."""
    return _cosine_order(Candidates(embedder, item))


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
    """The candidates by BM25 of the query (`retrieval.contracts.lexical.lexical_scores`: bm25s's scores)."""
    cands = item["candidates"]
    scores = lexical_scores(item["query"], [f"{c.get('title') or ''} {c['text']}" for c in cands])
    return [cands[i]["id"] for i in np.argsort(-np.asarray(scores), kind="stable")]


def selector_pick(selector, item: dict, handed: list[str], k: int, floor: int = 0) -> Pick:
    """The selector sees the candidates in `handed` order (cosine order, as retrieval hands them over); its pick is
    topped up to `floor` from that order, as the service does (`retrieval.contracts.selection.top_up`)."""
    by_id = {c["id"]: c for c in item["candidates"]}
    shown = [by_id[i] for i in handed]
    cands = [
        PromptCandidate(
            c.get("source") or c.get("title") or c["id"],
            c.get("title"),
            c["text"],
            c.get("parent_heading"),
            recalled=tuple(c.get("recalled") or ()),
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
    rule: GeneralRule = GeneralRule(),
) -> dict[str, dict]:
    """Every system's picks per query; `selector` and `others` (name -> selector) are challengers. An LLM
    (a `ChatSelector`, ~1 s a query on CPU) answers the first `llm_max_queries` queries only (0 = all);
    `rule` is the `general` baseline's (params.yaml's search section)."""
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
        seconds: dict[str, float] = {}
        orders = baseline_orders(embedder, item, rule, seconds)
        for b in BASELINES:
            picks[b][q] = Pick(tuple(orders[b][:k]), seconds=seconds[b])
        handed = orders["cosine"]
        for name, sel in models.items():
            if not isinstance(sel, ChatSelector) or not llm_max_queries or n < llm_max_queries:
                picks[name][q] = selector_pick(sel, item, handed, k, floor)
        if isinstance(champion, str) and q in picks[champion]:
            picks.setdefault("champion", {})[q] = picks[champion][q]
        progress()
    return picks
