"""Stage `build`: feedback records -> TRL/Unsloth conversational JSONL (contract 4) and a pairs view.

One example per query: the system and user turns are the selection contract's prompt over the
candidates above the query's threshold (what the selector was given), the assistant turn is
`{"selected": [...]}` of the candidates the consumer used (read by the one definition,
`retrieval.logs.used`), by retrieval rank. Train/val are split by
query text, so no query leaks across. Position-bias augmentation adds shuffled copies of train
examples with their labels remapped.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console

from retrieval.chunking import approx_tokens
from retrieval.contracts.selection import PROMPT_VERSION, PromptCandidate, render_answer, render_messages
from retrieval.files import write_atomic
from retrieval.logs.feedback_records import FEEDBACK_FILE, above_threshold, split_of
from retrieval.logs.used import used_labels
from retrieval.params import UsedParams, load_section


@dataclass(frozen=True)
class BuildParams:
    """The build stage: chat JSONL of used and ignored candidates for the LLM selector, and the split by query text that
    train_ranker and evaluate share."""

    feedback: str = "data/feedback"
    """the pull stage's folder"""
    out: str = "data/datasets"
    """train.jsonl, val.jsonl (chat messages), pairs.jsonl, stats.json"""
    val_fraction: float = 0.15
    """share of queries held out, split by query text (no leakage)"""
    include_empty: bool = False
    """queries where nothing was used become "select nothing" examples"""
    shuffles: int = 1
    """position-bias augmentation: shuffled copies per train example"""
    max_tokens: int = 6000
    """examples longer than this (prompt + answer) are dropped and counted"""
    chunk_tokens: int = 24
    """per-candidate text budget in the prompt; saved with the model, served the same. 24 keeps 20-candidate prompts
    ~1.4K tokens for the CPU profile; a GPU box: 200"""
    k: int = 5
    """at most this many picks per answer"""
    seed: int = 13
    """the seed of the candidate shuffles"""

    def problems(self) -> list[str]:
        out = []
        if not 0 < self.val_fraction < 1:
            out.append("build.val_fraction must be in (0, 1)")
        if self.shuffles < 0 or self.max_tokens < 64 or self.chunk_tokens < 8 or self.k < 1:
            out.append("build: need shuffles >= 0, max_tokens >= 64, chunk_tokens >= 8, k >= 1")
        return out


def example(query: str, candidates: list[dict], used_ranks: set[int], p: BuildParams, meta: dict) -> dict:
    """Contract 4: messages [system, user, assistant] + meta. Numbers are positions in `candidates`."""
    msgs = render_messages(
        query, [PromptCandidate(c["source"] or "", c["heading"], c["text"]) for c in candidates], p.k, p.chunk_tokens
    )
    selected = [i for i, c in enumerate(candidates, start=1) if c["rank"] in used_ranks][: p.k]
    msgs.append({"role": "assistant", "content": render_answer(selected)})
    return {
        "messages": msgs,
        "meta": {**meta, "selected": selected, "n": len(candidates), "prompt_version": PROMPT_VERSION},
    }


def build_examples(
    records: list[dict], p: BuildParams, used: UsedParams, count_tokens: Callable[[str], int] = approx_tokens
) -> tuple[dict[str, list[dict]], list[dict], Counter]:
    """(examples by split, pairs, skipped reasons) from pulled feedback records, their labels read by the one
    definition of used (`used_labels`)."""
    rng = random.Random(p.seed)
    splits: dict[str, list[dict]] = {"train": [], "val": []}
    pairs, skipped = [], Counter()
    for rec in records:
        rec = used_labels(rec, used)  # what counts as used, defined once (retrieval/logs/used.py)
        given = above_threshold(rec)
        if not given:
            skipped["no candidate above threshold"] += 1
            continue
        if any(c["text"] is None for c in given):
            skipped["candidate text changed or deleted since the query"] += 1
            continue
        if all(c["used"] is None for c in rec["candidates"]):
            skipped["no used/ignored labels"] += 1
            continue
        # exposed candidates only: one never shown to the consumer has no label, and is not taught as a negative
        labelled = [c for c in given if c["used"] is not None]
        all_used = {c["rank"] for c in rec["candidates"] if c["used"]}
        used_ranks = {c["rank"] for c in labelled if c["used"]}
        if all_used - used_ranks:
            skipped["used chunk was below threshold"] += 1
            continue
        if not used_ranks and not p.include_empty:
            skipped["nothing used"] += 1
            continue
        split = split_of(rec["query"], p.val_fraction)
        meta = {
            "query_id": rec["query_id"],
            "split": split,
            "selector_version": rec["selector_version"],
            "shuffled": False,
        }
        ex = example(rec["query"], labelled, used_ranks, p, meta)
        if sum(count_tokens(m["content"]) for m in ex["messages"]) > p.max_tokens:
            skipped["longer than build.max_tokens"] += 1
            continue
        splits[split].append(ex)
        if split == "train":
            for _ in range(p.shuffles):
                order = labelled[:]
                rng.shuffle(order)
                splits["train"].append(example(rec["query"], order, used_ranks, p, {**meta, "shuffled": True}))
        pos = [c["text"] for c in labelled if c["used"]]
        neg = [c["text"] for c in labelled if c["used"] is False]
        if pos and neg:
            pairs.append({"query": rec["query"], "pos": pos, "neg": neg, "split": split, "query_id": rec["query_id"]})
    return splits, pairs, skipped


def stats(
    splits: dict[str, list[dict]],
    pairs: list[dict],
    skipped: Counter,
    count_tokens: Callable[[str], int] = approx_tokens,
) -> dict:
    lengths = [sum(count_tokens(m["content"]) for m in ex["messages"]) for exs in splits.values() for ex in exs]
    n_candidates = sum(ex["meta"]["n"] for exs in splits.values() for ex in exs)
    n_sel = sum(len(ex["meta"]["selected"]) for exs in splits.values() for ex in exs)
    pct = (lambda q: int(np.percentile(lengths, q))) if lengths else (lambda q: 0)
    return {
        "train_examples": len(splits["train"]),
        "val_examples": len(splits["val"]),
        "train_queries": sum(not ex["meta"]["shuffled"] for ex in splits["train"]),
        "pairs": len(pairs),
        "used_ratio": round(n_sel / n_candidates, 4) if n_candidates else 0.0,
        "tokens_p50": pct(50),
        "tokens_p90": pct(90),
        "tokens_p99": pct(99),
        "tokens_max": max(lengths, default=0),
        "skipped": dict(skipped),
        "token_count": "approx (chars/4)",
    }


def main() -> None:
    p = load_section("params.yaml", "build", BuildParams)
    used = load_section("params.yaml", "used", UsedParams)
    console = Console(stderr=True)
    src = Path(p.feedback) / FEEDBACK_FILE
    records, bad = [], 0
    for n, line in enumerate(open(src, encoding="utf-8"), start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
            console.print(f"[yellow]skipped:[/yellow] {src}:{n}: malformed row")
    splits, pairs, skipped = build_examples(records, p, used)
    if bad:
        skipped["malformed row"] += bad
    if not splits["train"] or not splits["val"]:
        raise SystemExit(
            f"build: nothing usable for training ({len(splits['train'])} train, {len(splits['val'])} val; skipped {dict(skipped)})"
        )
    out = Path(p.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, exs in splits.items():
        write_atomic(out / f"{name}.jsonl", "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in exs))
    write_atomic(out / "pairs.jsonl", "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in pairs))
    s = stats(splits, pairs, skipped)
    write_atomic(out / "stats.json", json.dumps(s, indent=2) + "\n")
    console.print(
        f"build: {s['train_examples']} train ({s['train_queries']} queries), {s['val_examples']} val, "
        f"{s['pairs']} pairs; tokens p50 {s['tokens_p50']} / p99 {s['tokens_p99']}; skipped {s['skipped']}"
    )


if __name__ == "__main__":
    main()
