"""`pai lab simulate`: replay a benchmark's queries through the real `/query` path and post the feedback
a consumer would give, so a fresh machine gets a feedback log.

Two consumers (`replay.consumer`):
- `oracle` (the upper bound, not a real consumer): a judge who sees all 20 candidates and knows the gold
  documents (qrels / HotpotQA gold paragraphs): every relevant candidate used, every other one ignored.
- `realistic`: an assistant given only the context. It answers citing `[n]` the relevant chunks among
  those it was shown, missing each with `miss_rate` and citing each irrelevant one with
  `false_cite_rate`; it says nothing of the candidates it never saw (they stay unlabelled). Each citation
  closes a sentence: for a chunk it used, the chunk's sentence that best answers the query (an assistant
  quotes what it cites); for a false cite, that too with `false_cite_grounded` (it used a chunk that did not
  answer), else the claim itself (a misattribution: `[n]` on a claim chunk n does not hold). A miss quotes
  the chunk without its `[n]` with `miss_quoted`, else says nothing of it.
After the context, the service lists the next candidates as previews (`search.previews`): the realistic consumer
reads the first `previews_read` lines and expands (`POST /expand`) a relevant one with `expand_relevant`, any other
with `expand_irrelevant`; what it expanded it then cites (or not) exactly as a context chunk. The oracle expands
nothing (it judges every candidate already). Rating = +1 when what it read held a relevant chunk, else -1.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from eval.consumer import ReplayParams
from eval.retrieval_eval import doc_ids, load_scifact
from retrieval.chunking import approx_tokens
from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document, read_documents
from retrieval.db import connect
from retrieval.logs.grounding import best_sentence
from retrieval.params import load_section
from serving.client import PREVIEWS_HEADER, chunk_of
from serving.server import BackgroundServer, build_service


@dataclass(frozen=True)
class ReplayQuery:
    qid: str
    query: str
    relevant: frozenset[str]  # relevant document ids (the part of a source after '#')
    answer: str | None = None


@dataclass
class ReplaySummary:
    queries: int = 0
    with_used: int = 0  # queries where a relevant document was among the candidates
    used: int = 0
    ignored: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0
    served_relevant: float = 0.0  # sum over queries of the served context's recall of the relevant candidates
    planned_relevant: float = 0.0  # the same for the context exploration would not have touched
    general_relevant: float = 0.0  # the same for the first stage's own top (general alone: as many chunks, ranks 1..)
    explored: int = 0  # queries whose last context slot exploration gave to a candidate below the cut
    previews: int = 0  # previews listed after the context
    expanded: int = 0  # previews the consumer read whole
    expanded_relevant: int = 0  # of which relevant
    context_tokens: int = 0  # the context's chunks as the assistant reads them: each under its [n] line (`read_tokens`)
    preview_tokens: int = 0  # the previews' lines and their header
    expanded_tokens: int = 0  # the previews read whole, as `expand` returns them
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {
            **self.__dict__,
            "served_recall": round(self.served_relevant / self.with_used, 4) if self.with_used else 0.0,
            "served_recall_without_exploration": round(self.planned_relevant / self.with_used, 4)
            if self.with_used
            else 0.0,
            "general_recall": round(self.general_relevant / self.with_used, 4) if self.with_used else 0.0,
            "errors": len(self.errors),
            # what previews cost the consumer's prompt, over what the context alone costs
            "preview_token_share": round((self.preview_tokens + self.expanded_tokens) / self.context_tokens, 4)
            if self.context_tokens
            else 0.0,
            "queries_per_s": round(self.queries / self.seconds, 1) if self.seconds else 0.0,
        }


def benchmark_files(benchmark_dir: Path, benchmark: str) -> list[Path]:
    if benchmark == "scifact":
        return [benchmark_dir / "scifact" / "corpus.jsonl"]
    if benchmark == "hotpotqa":  # all paragraphs of all splits pooled as one corpus
        return [benchmark_dir / "hotpotqa" / f"{s}.jsonl" for s in ("train", "dev", "test")]
    raise ValueError(f"unknown benchmark {benchmark!r} (scifact or hotpotqa)")


def load_queries(benchmark_dir: Path, benchmark: str, split: str) -> list[ReplayQuery]:
    if benchmark == "scifact":
        return [ReplayQuery(q, text, frozenset(rel)) for q, text, rel in load_scifact(benchmark_dir, split)]
    if benchmark == "hotpotqa":
        out = []
        for line in open(benchmark_dir / "hotpotqa" / f"{split}.jsonl", encoding="utf-8"):
            r = json.loads(line)
            answers = r.get("answers") or []
            answer = (
                answers[0] if isinstance(answers, list) and answers else answers if isinstance(answers, str) else None
            )
            out.append(ReplayQuery(r["qid"], r["query"], frozenset(r["relevant_ids"]), answer))
        return out
    raise ValueError(f"unknown benchmark {benchmark!r} (scifact or hotpotqa)")


def corpus_documents(
    files: list[Path], queries: list[ReplayQuery], limit: int | None, max_bytes: int
) -> list[Document]:
    """The corpus; with `limit`, the queries' relevant documents plus the first `limit` others."""
    docs = [d for f in files for d in read_documents(f, max_bytes) if isinstance(d, Document)]
    if limit is None:
        return docs
    relevant = set().union(*(q.relevant for q in queries)) if queries else set()
    return [d for d in docs if d.source.rsplit("#", 1)[-1] in relevant] + [
        d for d in docs if d.source.rsplit("#", 1)[-1] not in relevant
    ][:limit]


def relevant_chunks(cands: list[dict], q: ReplayQuery) -> list[int]:
    return [c["chunk_id"] for c in cands if doc_ids([c["source"]])[0] in q.relevant]


def feedback_for(
    response: dict, q: ReplayQuery, p: ReplayParams = ReplayParams(), rng: random.Random | None = None
) -> dict:
    """The feedback the consumer `p.consumer` would post for one /query response."""
    context = response["context"]
    in_context = {c["chunk_id"] for c in context}
    if p.consumer == "oracle":
        used = relevant_chunks(response["candidates"], q)
        ignored = [c["chunk_id"] for c in response["candidates"] if c["chunk_id"] not in used]
        body = {"query_id": response["query_id"], "used_chunk_ids": used, "ignored_chunk_ids": ignored}
        body["rating"] = 1 if in_context & set(used) else -1
        if q.answer and q.answer.strip():  # the service refuses a blank answer
            body["answer"] = q.answer
        return body
    rng = rng or random.Random(p.seed)
    relevant = set(relevant_chunks(context, q))
    sentences = []
    for c in context:
        cite = f" [{c['rank']}]"
        if c["chunk_id"] in relevant:
            if rng.random() < p.miss_rate:  # missed: it said nothing of the chunk, or quoted it without the [n]
                if rng.random() >= p.miss_quoted:
                    continue
                cite = ""
            claim = best_sentence(c["text"], q.query)
        elif rng.random() < p.false_cite_rate:
            claim = best_sentence(c["text"], q.query) if rng.random() < p.false_cite_grounded else q.query
        else:
            continue
        sentences.append(f"{claim.strip().rstrip('.')}{cite}.")
    text = (q.answer or "").strip()
    if sentences:
        answer = " ".join(([f"{text}."] if text else []) + sentences)
    else:
        answer = f"{text or 'From the notes'}; the context did not say."
    return {"query_id": response["query_id"], "answer": answer, "rating": 1 if relevant else -1}


def read_previews(client: httpx.Client, body: dict, q: ReplayQuery, p: ReplayParams, rng: random.Random) -> list[dict]:
    """The previews the realistic consumer reads whole (`POST /expand`), by its chances for a relevant and an
    irrelevant one; the oracle reads none."""
    if p.consumer != "realistic":
        return []
    out = []
    for v in (body.get("previews") or [])[: p.previews_read]:
        chance = p.expand_relevant if doc_ids([v["source"]])[0] in q.relevant else p.expand_irrelevant
        if rng.random() < chance:
            e = client.post("/expand", json={"query_id": body["query_id"], "n": v["rank"]})
            e.raise_for_status()
            out.append(e.json())
    return out


def read_tokens(c: dict) -> int:
    """A chunk's tokens as the assistant reads it (`serving.client.Context.prompt`, MCP's `context` and `expand`):
    its [n] line (source, lines, heading) and its text (retrieval.chunking.approx_tokens)."""
    return approx_tokens(f"{chunk_of(c).cite()}\n{c['text'].strip()}")


def replay(
    base_url: str,
    queries: list[ReplayQuery],
    advance: Callable[[], None] = lambda: None,
    consumer: ReplayParams = ReplayParams(),
) -> ReplaySummary:
    s = ReplaySummary()
    rng = random.Random(consumer.seed)
    reads = random.Random(f"previews:{consumer.seed}")  # its own draws: the citations' stay as they were
    t0 = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for q in queries:
            try:
                r = client.post("/query", json={"query": q.query})
                r.raise_for_status()
                expanded = read_previews(client, r.json(), q, consumer, reads)
                # what it read whole: the context, then the previews it expanded, cited alike
                fb = feedback_for({**r.json(), "context": r.json()["context"] + expanded}, q, consumer, rng)
                used = client.post("/feedback", json=fb)
                used.raise_for_status()
            except httpx.HTTPError as e:
                s.errors.append(f"{q.qid}: {e}")
                advance()
                continue
            body = r.json()
            relevant = set(relevant_chunks(body["candidates"], q))
            labelled = len(body["candidates"]) if consumer.consumer == "oracle" else len(body["context"])
            s.queries += 1
            s.with_used += bool(relevant)
            s.used += len(used.json()["used_ranks"])
            s.ignored += labelled + len(expanded) - len(used.json()["used_ranks"])
            s.previews += len(body.get("previews") or [])
            s.expanded += len(expanded)
            s.expanded_relevant += len(relevant_chunks(expanded, q))
            s.context_tokens += sum(read_tokens(c) for c in body["context"])
            if body.get("previews"):
                lines = [f"[{v['rank']}] {v['preview']}" for v in body["previews"]]
                s.preview_tokens += approx_tokens("\n".join([PREVIEWS_HEADER, *lines]))
            s.expanded_tokens += sum(read_tokens(c) for c in expanded)
            context = {c["chunk_id"] for c in body["context"]}
            if body.get("exploration"):  # the context as the policy planned it, before exploration swapped a slot
                by_rank = {c["rank"]: c["chunk_id"] for c in body["candidates"]}
                s.explored += 1
                planned = context - {by_rank[body["exploration"]["explored_rank"]]}
                planned |= {by_rank[body["exploration"]["replaced_rank"]]}
            else:
                planned = context
            if relevant:  # what users got: the served context's share of the relevant candidates
                s.served_relevant += len(relevant & context) / len(relevant)
                s.planned_relevant += len(relevant & planned) / len(relevant)
                first = {c["chunk_id"] for c in body["candidates"] if c["rank"] <= len(body["context"])}
                s.general_relevant += len(relevant & first) / len(relevant)
            s.thumbs_up += fb["rating"] == 1
            s.thumbs_down += fb["rating"] == -1
            advance()
    s.seconds = time.perf_counter() - t0
    return s


def run_replay(
    params: Path,
    benchmark_dir: Path,
    benchmark: str,
    split: str,
    bar,
    url: str | None = None,
    limit: int | None = None,
    corpus_limit: int | None = None,
    ingest: bool = True,
    offset: int = 0,
) -> ReplaySummary:
    """Ingest the benchmark corpus (unless `ingest` is off: a store that holds it already, e.g. as notes from
    `write_notes`), then replay `split` through a service (`url`, or one started here)."""
    queries = load_queries(benchmark_dir, benchmark, split)[offset:]
    queries = queries[:limit] if limit else queries
    consumer = load_section(params, "replay", ReplayParams)
    service = build_service(params)
    if ingest:
        docs = corpus_documents(
            benchmark_files(benchmark_dir, benchmark), queries, corpus_limit, service.ingest.max_file_bytes
        )
        task = bar.add_task(f"ingest {benchmark} corpus", total=len(docs))
        with connect(service.db_url) as conn:
            for start in range(0, len(docs), 512):
                ingest_documents(conn, docs[start : start + 512], service.ingest, service.search, service.embedder)
                bar.update(task, completed=min(start + 512, len(docs)))
    task = bar.add_task(f"replay {len(queries)} {benchmark} {split} queries", total=len(queries))
    if url:
        return replay(url, queries, lambda: bar.advance(task), consumer)
    with BackgroundServer(service) as srv:
        return replay(srv.url, queries, lambda: bar.advance(task), consumer)


def write_notes(benchmark_dir: Path, benchmark: str, out: Path, limit: int | None = None, split: str = "train") -> int:
    """The benchmark's corpus as a folder of markdown notes, one per document, named by its id (`# title`, then
    the text): a user's store of notes whose relevance the replay still knows. With `limit`, the relevant
    documents of `split`'s queries plus the first `limit` others. Returns the notes written."""
    queries = load_queries(benchmark_dir, benchmark, split)
    docs = corpus_documents(benchmark_files(benchmark_dir, benchmark), queries, limit, 5_000_000)
    out.mkdir(parents=True, exist_ok=True)
    for d in docs:
        name = d.source.rsplit("#", 1)[-1].replace("/", "_")
        (out / f"{name}.md").write_text(f"# {d.title or name}\n\n{d.text.strip()}\n", encoding="utf-8")
    return len(docs)
