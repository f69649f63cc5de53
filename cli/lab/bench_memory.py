"""`pai lab bench memory`: LoCoMo conversations kept as chat logs, ingested into a fresh database each, every question
asked through the service's query path in-process (`serving.service.run_query`: embed, hybrid search, pick,
the context cut, the log), scored by which evidence turns the served context holds (eval/bench/memory.py),
beside BM25 and MiniLM over single turns at the same token count."""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.progress import Progress

from eval.bench import memory, memory_orders
from eval.reader import ReaderError, answer_contexts, make_reader
from retrieval.chunking import approx_tokens
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import DatabaseError, connect, pai_home, scratch_database
from retrieval.embed import get_embedder
from retrieval.logs.feedback import record_feedback
from retrieval.params import EmbedParams, IngestParams, SearchParams, UsedParams, load_section
from retrieval.progress import make_progress
from serving.selectors import resolve
from serving.server import build_service
from serving.service import in_process, run_query
from training import train_ranker
from training.build import BuildParams
from training.pull import PullParams, pull
from training.train_ranker import RankerParams

from ..terminal import BENCH_SERVICE, JsonOpt, OutOpt, ParamsOpt, _fail, console, emit, judged_dir, machine

app = typer.Typer()
DatasetOpt = Annotated[str, typer.Option(help="the benchmark (only locomo)")]
ConversationsOpt = Annotated[
    Optional[list[str]], typer.Option("--conversations", help="conversation names (conv-26); repeat; default all")
]
DataDirOpt = Annotated[
    Optional[Path],
    typer.Option(
        help="the folder holding the conversations' JSON; default: locomo in params.yaml benchmark.benchmark_dir",
        show_default=False,
    ),
]


def serve_conversation(
    conv: memory.Conversation, params: Path, k: int | None, fmt: str, selector: str, say, log_to: Path | None = None
) -> list[dict]:
    """One conversation in a fresh store: write it as a user keeps it, ingest, ask every question. With `log_to`,
    a consumer cites the served chunks that hold an evidence turn of the question (`/feedback`), and the log is
    pulled into `log_to` as the pull stage writes it."""
    with scratch_database("pai_bench_memory") as url, tempfile.TemporaryDirectory() as tmp:
        chosen = resolve(selector)
        service = build_service(params, chosen, inline=True, staging_dir=Path(tmp) / "staging", db_url=url)
        ingest_conversation(conv, params, fmt, url, Path(tmp), service.embedder, say)
        service.picker.explore_rate = 0.0  # the served order, not exploration's draws
        baselines = memory.baseline_contexts(conv, service.embedder)
        turns, records = conv.turns, []
        with in_process(service):
            for i, q in enumerate(conv.questions, 1):
                t0 = time.perf_counter()
                body = run_query(service, q.text, inline=True, k=k)
                ms = (time.perf_counter() - t0) * 1000
                context = [c["text"] for c in body["context"]]
                tokens = sum(approx_tokens(t) for t in context)
                rec = {"system": "served", "category": q.category, "ms": ms, "tokens": tokens, "question": q}
                rec |= {"found": memory.found(q.evidence, turns, context), "dated": _dated(body), "context": context}
                records.append(rec)
                if log_to is not None:
                    _cite(service, body, memory.found_in(q.evidence, turns, context))
                ids = [c["chunk_id"] for c in body["candidates"]]
                with service.pool.connection() as conn:
                    pool = [t for (t,) in conn.execute("SELECT text FROM chunks WHERE id = ANY(%s)", (ids,))]
                records.append(
                    {
                        "system": "top20_candidates",
                        "category": q.category,
                        "found": memory.found(q.evidence, turns, pool),
                    }
                )
                for name, f in baselines.items():
                    ctx = f(q.text, tokens)
                    found = memory.found(q.evidence, turns, ctx)
                    records.append(
                        {"system": name, "category": q.category, "found": found, "question": q, "context": ctx}
                    )
                if i % 50 == 0:
                    say(f"{conv.name}: {i}/{len(conv.questions)} questions")
            if log_to is not None:
                pull(PullParams(out=str(log_to), lag_seconds=0.0), url=url)
    return records


def ingest_conversation(conv: memory.Conversation, params: Path, fmt: str, url: str, tmp: Path, embedder, say) -> None:
    """`conv` written into `tmp` as a user keeps it (markdown chat logs or one JSONL transcript) and ingested into
    the store at `url`, as `pai ingest` does."""
    ip, sp = load_section(params, "ingest", IngestParams), load_section(params, "search", SearchParams)
    folder = tmp / conv.name
    folder.mkdir()
    files = memory.chat_logs(conv) if fmt == "markdown" else {f"{conv.name}.jsonl": memory.transcript_jsonl(conv)}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    with connect(url) as conn:
        report = ingest_paths(conn, [folder], ip, sp, embedder)
        (n_chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    say(f"{conv.name}: {len(files)} files -> {n_chunks} chunks ({len(report.errors)} errors)")


def _cite(service, body: dict, used: list[bool]) -> None:
    """The consumer's feedback: it used the served chunks that hold an evidence turn (the others: ignored)."""
    ids = [c["chunk_id"] for c, u in zip(body["context"], used) if u]
    with service.pool.connection() as conn:
        record_feedback(conn, body["query_id"], used_chunk_ids=ids)


def learned_ranker(conv: memory.Conversation, params: Path, fmt: str, folder: Path, say) -> str:
    """The loop on conversation memory: `conv` served by the first-stage order, its consumer's citations pulled,
    a ranker trained on them by `train_ranker.train_on_log` (as the pipeline's stage does); the ranker's folder."""
    serve_conversation(conv, params, None, fmt, "first-stage", say, log_to=folder / "feedback")
    rp = replace(load_section(params, "train_ranker", RankerParams), feedback=str(folder / "feedback"))
    val_fraction = load_section(params, "build", BuildParams).val_fraction
    try:
        w, vecs, record, m = train_ranker.train_on_log(rp, val_fraction, load_section(params, "used", UsedParams))
    except train_ranker.TooLittleFeedback as e:  # too few cited queries to train on: one line, as any bad input
        raise ValueError(f"--learn-from {conv.name}: {e}") from None
    train_ranker.write(folder / "ranker", w, vecs, record, m)
    say(f"ranker trained on {conv.name}: {m['adapter_queries']} queries, weights {record['weights']}")
    return str(folder / "ranker")


def _dated(body: dict) -> float:
    """Share of the served chunks whose text names a date (a YYYY-MM-DD)."""
    ctx = body["context"]
    return sum(bool(re.search(r"\d{4}-\d{2}-\d{2}", c["text"])) for c in ctx) / len(ctx) if ctx else 1.0


def run(
    convs: list[memory.Conversation],
    params: Path,
    k: int | None,
    fmt: str,
    selector: str,
    say,
    reader_questions: int = 0,
) -> dict:
    records = [r | {"conv": c} for c in convs for r in serve_conversation(c, params, k, fmt, selector, say)]
    systems = {}
    for name in ("served", "top20_candidates", "bm25_turns", "minilm_turns"):
        mine = [r for r in records if r["system"] == name]
        systems[name] = memory.score(mine)
    served = [r for r in records if r["system"] == "served"]
    systems["served"] |= {
        "tokens_mean": round(float(np.mean([r["tokens"] for r in served])), 1),
        "p50_ms": round(float(np.percentile([r["ms"] for r in served], 50)), 1),
        "dated_share": round(float(np.mean([r["dated"] for r in served])), 3),
    }
    return {
        "machine": machine(),
        "conversations": [c.name for c in convs],
        "questions": systems["served"]["questions"],
        "dropped_evidence": sum(c.dropped_evidence for c in convs),
        "k": k,
        "format": fmt,
        "selector": selector,
        "systems": systems,
        "answers": read_answers(records, reader_questions, say) if reader_questions else {},
    }


def read_answers(records: list[dict], n: int, say) -> dict:
    """The reader (params `evaluate.reader`'s default: the packaged SmolLM2 through llama.cpp) answers the first `n`
    questions with a gold answer of each conversation from each system's context, and from the evidence turns alone
    (its ceiling); EM and F1 against LoCoMo's answers (eval/reader.py)."""
    questions, contexts = [], {}
    convs = {r["conv"].name: r["conv"] for r in records}
    for conv, c in convs.items():
        mine = [r for r in records if r["conv"].name == conv and "context" in r]
        asked = [r["question"] for r in mine if r["system"] == "served" and r["question"].answers][:n]
        for i, q in enumerate(asked):
            qid = f"{conv}/{i}"
            questions.append((qid, q.text, list(q.answers)))
            for r in mine:
                if r["question"] is q:
                    contexts.setdefault(r["system"], {})[qid] = r["context"]
            contexts.setdefault("ceiling", {})[qid] = [c.turns[e] for e in q.evidence]
    say(f"reader: {len(questions)} questions x {len(contexts)} contexts")
    reader = make_reader("", cache_dir=pai_home() / "cache" / "reader-answers")
    try:
        with make_progress(*Progress.get_default_columns(), console=console) as bar:
            return answer_contexts(
                questions, contexts, reader, progress=lambda n: lambda t=bar.add_task("reader", total=n): bar.advance(t)
            )
    finally:
        reader.close()


@app.command(
    "memory", rich_help_panel=BENCH_SERVICE, short_help="A memory of conversations (LoCoMo): evidence turns in context."
)
def bench_memory_command(
    dataset: DatasetOpt = "locomo",
    conversations: ConversationsOpt = None,
    data_dir: DataDirOpt = None,
    k: Annotated[int, typer.Option(help="give at most the first k chunks of the context (/query's k); 0 = no cap")] = 0,
    fmt: Annotated[str, typer.Option("--format", help="how the conversation is kept: markdown or jsonl")] = "markdown",
    selector: Annotated[
        str, typer.Option(help="first-stage (no selector) or a selector folder, as `pai serve --selector`")
    ] = "first-stage",
    learn_from: Annotated[
        Optional[str],
        typer.Option(
            help="a conversation served first; its consumer's citations train the ranker that serves the others"
        ),
    ] = None,
    reader_questions: Annotated[
        int,
        typer.Option(
            help="the reader (the packaged SmolLM2) answers the first this many answered questions of each "
            "conversation from every system's context and from the evidence alone: EM, F1; 0 = off"
        ),
    ] = 0,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """A memory of conversations: evidence turns in the served context, per category, beside single-turn baselines;
    with `--reader-questions`, answer quality by a reader."""
    data_dir = judged_dir(params, None) / "locomo" if data_dir is None else data_dir  # eval.judged_sets unpacks it
    try:
        if fmt not in ("markdown", "jsonl"):
            raise ValueError("--format: markdown or jsonl")
        names, convs = _load(dataset, conversations, data_dir)
        with tempfile.TemporaryDirectory() as tmp:
            if learn_from:
                if learn_from in names:
                    raise ValueError(f"--learn-from {learn_from}: also among --conversations (never in-sample)")
                selector = learned_ranker(memory.load(data_dir / f"{learn_from}.json"), params, fmt, Path(tmp), say)
            result = run(convs, params, k or None, fmt, selector, say, reader_questions) | {"learned_from": learn_from}
    except (OSError, ValueError, KeyError, DatabaseError, ReaderError) as e:
        _fail(str(e) if not isinstance(e, KeyError) else f"not a LoCoMo conversation: no {e}")
    emit(result, as_json, out, memory.table(result) + f"\nserved chunks that name a date: {_share(result)}")


def _load(dataset: str, conversations: list[str] | None, data_dir: Path) -> tuple[list[str], list[memory.Conversation]]:
    if dataset != "locomo":
        raise ValueError("--dataset: only locomo")
    names = conversations or sorted(p.stem for p in data_dir.glob("conv-*.json"))
    if not names:
        raise ValueError(f"{data_dir}: no conv-*.json")
    return names, [memory.load(data_dir / f"{n}.json") for n in names]


def say(message: str) -> None:
    console.print(message, style="dim")


@app.command(
    "memory-orders",
    rich_help_panel=BENCH_SERVICE,
    short_help="Orders of a conversation's chunks replayed: evidence in context.",
)
def bench_memory_orders_command(
    dataset: DatasetOpt = "locomo",
    conversations: ConversationsOpt = None,
    data_dir: DataDirOpt = None,
    params: ParamsOpt = Path("params.yaml"),
    as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Each order of eval/bench/memory_orders.py (the served first stage; cosine, the store's BM25 and their fusions
    over the whole store) cut into the context as the service cuts it, scored as `pai lab bench memory` scores it."""
    data_dir = judged_dir(params, None) / "locomo" if data_dir is None else data_dir
    try:
        _, convs = _load(dataset, conversations, data_dir)
        sp = load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
        stores = []
        for conv in convs:
            with scratch_database("pai_bench_memory") as url, tempfile.TemporaryDirectory() as tmp:
                ingest_conversation(conv, params, "markdown", url, Path(tmp), embedder, say)
                with connect(url) as conn:
                    stores.append(memory_orders.read_store(conn, conv, embedder, sp))
        systems = memory_orders.replay(stores, sp)
    except (OSError, ValueError, KeyError, DatabaseError) as e:
        _fail(str(e) if not isinstance(e, KeyError) else f"not a LoCoMo conversation: no {e}")
    result = {
        "machine": machine(),
        "conversations": [c.name for c in convs],
        "questions": next(iter(systems.values()))["questions"],
        "dropped_evidence": sum(c.dropped_evidence for c in convs),
        "systems": systems,
    }
    emit(result, as_json, out, memory.table(result))


def _share(result: dict) -> str:
    return f"{result['systems']['served']['dated_share']:.3f}"
