"""`python -m cli.lab.llm_study`: does the LLM selector learn on real weights? A measurement, not a stage.

The CPU profile's real base (SmolLM2-135M-Instruct, training/base_model.py) is fine-tuned with the train stage's
own code on a chat JSONL built from judged HotpotQA *train* items (their gold paragraphs as the 'used' labels,
candidates in cosine order as retrieval hands them over, the build stage's prompt), exported to GGUF by the
export stage's code (with its parity check), then the base GGUF, the fine-tuned GGUF and the baselines pick on a
fixed sample of HotpotQA *test*: Recall@5 with paired bootstrap CIs, the share of outputs that parse, the loss
curve. The figures land in metrics/llm_study.json (docs/measurements.md quotes them).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from eval.reader import answer_quality, make_reader
from eval.systems import cosine_ranking, run_systems
from retrieval.contracts.metrics import paired_bootstrap, per_query
from retrieval.contracts.selection import PromptCandidate, render_answer, render_messages
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.params import EmbedParams, load_section
from serving.llm_selectors import LlamaCppSelector
from training.base_model import packaged_gguf
from training.build import BuildParams
from training.export import ExportParams, export
from training.train import TrainParams, train

app = typer.Typer()


def chat_rows(items: list[dict], embedder, p: BuildParams) -> list[dict]:
    """One training example per judged item: the candidates in cosine order, the gold ones as the answer."""
    rows = []
    for it in items:
        by_id = {c["id"]: c for c in it["candidates"]}
        order = cosine_ranking(embedder, it)
        cands = [PromptCandidate(by_id[i].get("title") or i, by_id[i].get("title"), by_id[i]["text"]) for i in order]
        msgs = render_messages(it["query"], cands, p.k, p.chunk_tokens)
        gold = set(it["relevant_ids"])
        msgs.append({"role": "assistant", "content": render_answer([n for n, i in enumerate(order, 1) if i in gold])})
        rows.append({"messages": msgs, "meta": {"qid": it["qid"]}})
    return rows


def load(path: Path, n: int) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(n))]


@app.command()
def main(
    train_examples: Annotated[int, typer.Option(help="HotpotQA train items fine-tuned on")] = 48,
    test_queries: Annotated[int, typer.Option(help="HotpotQA test items scored (the first this many)")] = 150,
    reader_queries: Annotated[int, typer.Option(help="of those, answered by the reader from each pick")] = 20,
    judged: Annotated[Path, typer.Option(help="the judged sets")] = Path("data/judged"),
    out: Annotated[Path, typer.Option(help="where the figures go")] = Path("metrics/llm_study.json"),
    params: Annotated[Path, typer.Option(help="params.yaml")] = Path("params.yaml"),
) -> None:
    bp = load_section(params, "build", BuildParams)
    tp = load_section(params, "train", TrainParams)
    ep = load_section(params, "export", ExportParams)
    embedder = get_embedder(load_section(params, "embed", EmbedParams))
    result: dict = {
        "train_set": f"hotpotqa/train first {train_examples}",
        "test_set": f"hotpotqa/test first {test_queries}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        rows = chat_rows(load(judged / "hotpotqa" / "train.jsonl", train_examples + 8), embedder, bp)
        for name, part in (("train.jsonl", rows[:train_examples]), ("val.jsonl", rows[train_examples:])):
            (data / name).write_text("".join(json.dumps(r) + "\n" for r in part))
        t0 = time.perf_counter()
        tm = train(replace(tp, profile="cpu", data=str(data), out=f"{tmp}/model", cpu_max_examples=train_examples), bp)
        result["train"] = {**tm, "wall_s": round(time.perf_counter() - t0, 1)}
        t0 = time.perf_counter()
        em = export(replace(ep, model=f"{tmp}/model", out=f"{tmp}/export", parity_prompts=8), data)
        result["export"] = {
            **{k: v for k, v in em.items() if k != "examples"},
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        items = load(judged / "hotpotqa" / "test.jsonl", test_queries)
        n_ctx = tp.cpu_max_length + 64
        base = LlamaCppSelector(packaged_gguf(), "base", bp.chunk_tokens, n_ctx=n_ctx)
        tuned = LlamaCppSelector(Path(tmp) / "export" / "selector.gguf", "fine-tuned", bp.chunk_tokens, n_ctx=n_ctx)
        t0 = time.perf_counter()
        picks = run_systems(items, embedder, bp.k, others={"base": base, "fine-tuned": tuned})
        result["eval_wall_s"] = round(time.perf_counter() - t0, 1)
        base.close(), tuned.close()
        t0 = time.perf_counter()
        reader = make_reader("")
        result["answers"] = answer_quality(items, picks, reader, reader_queries)
        reader.close()
        result["reader_wall_s"] = round(time.perf_counter() - t0, 1)
    relevant = {it["qid"]: set(it["relevant_ids"]) for it in items}
    recall = {s: per_query(relevant, {q: p.ids for q, p in by_q.items()})["recall@5"] for s, by_q in picks.items()}
    result["recall@5"] = {s: round(float(np.mean(v)), 4) for s, v in recall.items()}
    result["parses"] = {
        s: round(sum(p.status != "fallback" for p in picks[s].values()) / len(items), 4) for s in ("base", "fine-tuned")
    }
    result["paired"] = {}
    for a, b in (("fine-tuned", "base"), ("fine-tuned", "general"), ("base", "general")):
        d, lo, hi = paired_bootstrap(recall[a], recall[b], seed=0)
        result["paired"][f"{a}_vs_{b}"] = {"diff": round(d, 4), "ci95_low": round(lo, 4), "ci95_high": round(hi, 4)}
    write_atomic(out, json.dumps(result, indent=2) + "\n")
    typer.echo(json.dumps({k: result[k] for k in ("recall@5", "parses", "paired")}, indent=1))


if __name__ == "__main__":
    app()
