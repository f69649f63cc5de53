"""A memory of conversations (`pai lab bench memory`): LoCoMo conversations kept as chat logs, their questions asked
through the service, scored by whether the evidence turns reach the served context.

This module is the pure part: reading a LoCoMo conversation, writing it as a user keeps it (markdown chat logs,
one file per session, dated heading, one paragraph per turn; or the generic JSONL transcript), reading its
questions' evidence leniently, scoring a context by containment of the evidence turns' text, and the plain
baselines (BM25 and MiniLM cosine over single turns, top-down to the same token count). `cli/lab/bench_memory.py`
ingests, serves and times.

Categories (the dataset's README): 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (its
premise is false: reported apart, as "context holds the premise's turn").
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.chunking import approx_tokens
from retrieval.contracts.lexical import bm25_raw
from retrieval.embed import Embedder

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERED = (1, 2, 3, 4)
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: list[str]  # dia_ids that exist in the conversation
    answers: tuple[str, ...] = ()  # the gold answer (categories 1-4; an adversarial question has none)


@dataclass
class Conversation:
    name: str
    speakers: tuple[str, str]
    sessions: list[tuple[int, str, list[dict]]]  # (number, "1:56 pm on 8 May, 2023", turns)
    questions: list[Question]
    dropped_evidence: int  # evidence strings that name no turn of the conversation

    @property
    def turns(self) -> dict[str, str]:
        """dia_id -> the turn's text as the chat log holds it."""
        return {t["dia_id"]: turn_text(t) for _, _, ts in self.sessions for t in ts}


def turn_text(turn: dict) -> str:
    """A turn's text; a shared photo's caption follows it, as a chat export shows an attachment."""
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares a photo: {caption}]" if caption else turn["text"]


def load(path: Path) -> Conversation:
    d = json.loads(path.read_text(encoding="utf-8"))
    conv = d.get("conversation", d)
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    sessions = [(n, conv[f"session_{n}_date_time"], conv[f"session_{n}"]) for n in numbers]
    known = {t["dia_id"] for _, _, ts in sessions for t in ts}
    questions, dropped = [], 0
    for q in d["qa"]:
        ids = [f"D{s}:{t}" for e in q.get("evidence", []) for s, t in _EVIDENCE.findall(str(e))]
        dropped += sum(i not in known for i in ids) + sum(not _EVIDENCE.search(str(e)) for e in q.get("evidence", []))
        evidence = [i for i in dict.fromkeys(ids) if i in known]
        answers = (str(q["answer"]),) if q.get("answer") is not None else ()
        questions.append(Question(q["question"], int(q["category"]), evidence, answers))
    return Conversation(path.stem, (conv["speaker_a"], conv["speaker_b"]), sessions, questions, dropped)


def chat_logs(conv: Conversation) -> dict[str, str]:
    """File name -> markdown chat log, one per session."""
    out = {}
    for n, when, turns in conv.sessions:
        paras = [f"{t['speaker']}: {turn_text(t)}" for t in turns]
        out[f"{conv.name}-session-{n:02d}.md"] = f"# Session {n} — {when}\n\n" + "\n\n".join(paras) + "\n"
    return out


def transcript_jsonl(conv: Conversation) -> str:
    """The conversation as the generic transcript JSONL: one `{"session", "time", "speaker", "text"}` a line."""
    rows = [
        {"session": f"session {n}", "time": when, "speaker": t["speaker"], "text": turn_text(t)}
        for n, when, turns in conv.sessions
        for t in turns
    ]
    return "".join(json.dumps(r) + "\n" for r in rows)


def norm(text: str) -> str:
    return " ".join(text.split()).lower()


def found(evidence: list[str], turns: dict[str, str], context: list[str]) -> list[bool]:
    """Per evidence turn: is its text contained in a chunk of the context?"""
    texts = [norm(c) for c in context]
    return [any(norm(turns[e]) in c for c in texts) for e in evidence]


def found_in(evidence: list[str], turns: dict[str, str], context: list[str]) -> list[bool]:
    """Per chunk of the context: does it hold an evidence turn?"""
    wanted = [norm(turns[e]) for e in evidence]
    return [any(w in norm(c) for w in wanted) for c in context]


def baseline_contexts(conv: Conversation, embedder: Embedder) -> dict[str, callable]:
    """name -> f(question, token budget) -> the single turns taken top-down to that many tokens."""
    ids = list(conv.turns)
    texts = [conv.turns[i] for i in ids]
    vectors = embedder.encode_passages(texts)

    def top_down(scores: np.ndarray, budget: int) -> list[str]:
        out, used = [], 0
        for j in np.argsort(-scores, kind="stable"):
            if out and used + approx_tokens(texts[j]) > budget:
                break
            out.append(texts[j])
            used += approx_tokens(texts[j])
        return out

    return {
        "bm25_turns": lambda q, budget: top_down(bm25_raw(q, texts), budget),
        "minilm_turns": lambda q, budget: top_down(vectors @ embedder.encode([q])[0], budget),
    }


def score(records: list[dict]) -> dict:
    """records: {"category", "found": [bool per evidence turn], ...} -> recall per category and overall (1-4),
    the all-evidence rate, and for category 5 the share whose premise's turn is in the context."""
    by: dict[int, list[list[bool]]] = defaultdict(list)
    for r in records:
        if r["found"]:
            by[r["category"]].append(r["found"])
    answered = [f for c in ANSWERED for f in by[c]]
    flat = [x for f in answered for x in f]
    out = {
        "questions": len(answered),
        "recall": _mean(flat),
        "all_evidence": _mean([all(f) for f in answered]),
        "by_category": {CATEGORIES[c]: _mean([x for f in by[c] for x in f]) for c in ANSWERED},
        "adversarial_premise_in_context": _mean([any(f) for f in by[5]]),
        "adversarial_questions": len(by[5]),
    }
    return out


def _mean(xs: list) -> float:
    return round(float(np.mean(xs)), 3) if xs else 0.0


def table(result: dict) -> str:
    lines = [
        f"memory bench on {', '.join(result['conversations'])} ({result['questions']} questions of categories 1-4;"
        f" {result['dropped_evidence']} evidence strings named no turn) — {result['machine']}",
        f"{'system':<16} {'recall':>7} {'multi':>6} {'temp':>6} {'open':>6} {'single':>7} {'all-ev':>7}"
        f" {'adv.prem':>8} {'tokens':>7} {'p50 ms':>7}",
    ]
    for name, s in result["systems"].items():
        c = s["by_category"]
        lines.append(
            f"{name:<16} {s['recall']:>7.3f} {c['multi-hop']:>6.3f} {c['temporal']:>6.3f} {c['open-domain']:>6.3f}"
            f" {c['single-hop']:>7.3f} {s['all_evidence']:>7.3f} {s['adversarial_premise_in_context']:>8.3f}"
            f" {s.get('tokens_mean', 0):>7.0f} {s.get('p50_ms', 0):>7.1f}"
        )
    if result.get("answers"):
        a = result["answers"]
        lines.append(f"reader {a['reader']}, first {a['queries']} answered questions: EM / F1")
        lines += [f"{name:<16} {m['em']:>7.3f} / {m['f1']:.3f}" for name, m in a["systems"].items()]
    return "\n".join(lines)
