"""The selection contract (DESIGN.md, contracts 1 and 2): one prompt format and one output parser,
shared by training, evaluation and serving. Change either only with a PROMPT_VERSION bump.

The selector sees the query and candidates numbered 1..N and answers `{"selected": [i, ...]}`:
unique candidate numbers, at most k, most relevant first. `parse_selection` never raises: output
that cannot be used as is gets repaired (bad items dropped) or replaced by the similarity order,
and the result says which happened.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .chunking import approx_tokens

PROMPT_VERSION = "pai-select/2"  # 2: sources shown as their last two path parts
DEFAULT_K = 5

SYSTEM_TEMPLATE = (
    "You choose context for a question-answering assistant. You are given a query and candidate "
    "passages numbered 1 to {n}. Pick the passages that help answer the query, at most {k}, most "
    "relevant first. If none helps, pick none.\n"
    'Reply with JSON only, exactly of this form: {{"selected": [numbers]}}\n'
    "JSON schema: {schema}"
)


def output_schema(n: int, k: int = DEFAULT_K) -> dict:
    """JSON schema of the answer, for constrained decoding (Ollama `format`, llama.cpp grammar)."""
    return {
        "type": "object",
        "properties": {
            "selected": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1, "maximum": max(n, 1)},
                "maxItems": k,
                "uniqueItems": True,
            }
        },
        "required": ["selected"],
        "additionalProperties": False,
    }


ANSWER_HEAD = '{"selected": ['


def answer_state(text: str, n: int, k: int = DEFAULT_K) -> str | None:
    """Where `text` stands as a prefix of a canonical answer (`render_answer` of numbers 1..n, at
    most k): "open" (more must follow), "done" (complete), or None (no valid answer starts so).
    Constrained decoders keep a model's output inside the contract with it."""
    if len(text) <= len(ANSWER_HEAD):
        return "open" if ANSWER_HEAD.startswith(text) else None
    if not text.startswith(ANSWER_HEAD):
        return None
    state, num, count = "first", "", 0
    for ch in text[len(ANSWER_HEAD) :]:
        if state in ("first", "next") and ch in "123456789" and count < k and int(ch) <= n:
            state, num, count = "num", ch, count + 1
        elif state == "first" and ch == "]":
            state = "close"
        elif state == "num" and ch.isdigit() and int(num + ch) <= n:
            num += ch
        elif state == "num" and ch == "," and count < k:
            state = "comma"
        elif state == "num" and ch == "]":
            state = "close"
        elif state == "comma" and ch == " ":
            state = "next"
        elif state == "close" and ch == "}":
            state = "done"
        else:
            return None
    return "done" if state == "done" else "open"


CE_INPUT_FORMAT = "ce-input/1"  # the cross-encoder's passage side; saved with the model, served the same
CE_DTYPES = ("auto", "float32", "bfloat16")  # the cross-encoder's serving precision (`train_ce.serve_dtype`)


def ce_dtype(name: str) -> str:
    """The precision a cross-encoder runs in: `auto` = bfloat16 where the CPU computes it natively
    (AVX512-BF16 or AMX), else float32. Emulated bfloat16 would be slower than float32."""
    import torch

    if name not in CE_DTYPES:
        raise ValueError(f"cross-encoder dtype {name!r}: expected one of {', '.join(CE_DTYPES)}")
    if name != "auto":
        return name
    native = any(getattr(torch.cpu, f, lambda: False)() for f in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    return "bfloat16" if native else "float32"


def ce_passage(heading: str | None, text: str) -> str:
    """The passage side of a cross-encoder pair (CE_INPUT_FORMAT): the heading, if any, above the text."""
    return f"{heading}\n{text}" if heading else text


def ce_clip(text: str, max_length: int) -> str:
    """`text` cut just before its word number `max_length + 1` (words split by whitespace). A pair truncated
    to `max_length` word pieces keeps the same pieces of the cut text as of the whole one: every word is at
    least one piece and the cut falls between words. The tokenizer then skips the rest of a long passage."""
    parts = text.split(maxsplit=max_length)
    return text if len(parts) <= max_length else text[: len(text) - len(parts[-1])]


_BM25_WORD = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's defaults: lowercased words of 2+ characters, English stopwords out


@functools.cache
def _bm25_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _bm25_terms(text: str) -> list[str]:
    stop = _bm25_stopwords()
    return [w for w in _BM25_WORD.findall(text.lower()) if w not in stop]


def lexical_scores(query: str, texts: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """BM25 of `query` against the candidates alone, standardised within them (mean 0, sd 1; all 0 when
    they do not differ): the fusion's keyword feature, the same in training and serving. The scores of
    bm25s (Lucene variant, its default tokenizer), computed directly: bm25s builds a sparse index, which
    costs more than the scoring on 20 passages."""
    if not texts:
        return []
    docs = [Counter(_bm25_terms(t)) for t in texts]
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    raw = np.zeros(len(texts))
    if lengths.sum() > 0:
        norm = k1 * ((1 - b) + b * lengths / lengths.mean())
        for word in _bm25_terms(query):  # a repeated query word counts each time, as in bm25s
            tf = np.array([d.get(word, 0) for d in docs], dtype=np.float64)
            df = int(np.count_nonzero(tf))
            if df:
                raw += math.log(1 + (len(docs) - df + 0.5) / (df + 0.5)) * tf / (norm + tf)
    sd = raw.std()
    return [0.0] * len(texts) if sd < 1e-9 else [float(x) for x in (raw - raw.mean()) / sd]


def fuse_scores(scores: list[float], fusion: dict | None, lexical: list[float] | None = None) -> list[float]:
    """A cross-encoder's scores for candidates in retrieval order, fused with that order's prior and,
    when the fusion has a `bm25_weight`, the candidates' `lexical_scores` (`train_ce`'s fitted fusion:
    ce_weight * score + rank_bias[position] + bm25_weight * lexical); None = the scores alone."""
    if not fusion:
        return list(scores)
    bias, w_lex = fusion["rank_bias"], fusion.get("bm25_weight", 0.0)
    if w_lex and (lexical is None or len(lexical) != len(scores)):
        raise ValueError("this fusion weighs BM25: pass the candidates' lexical_scores")
    return [fusion["ce_weight"] * x + bias[min(i, len(bias) - 1)] + (w_lex * lexical[i] if w_lex else 0.0) for i, x in enumerate(scores)]


def fuse_for(query: str, texts: list[str], scores: list[float], fusion: dict | None) -> list[float]:
    """`fuse_scores` for one query's candidate passages, their BM25 computed only if the fusion weighs it."""
    needs_lexical = bool(fusion and fusion.get("bm25_weight"))
    return fuse_scores(scores, fusion, lexical_scores(query, texts) if needs_lexical else None)


@dataclass(frozen=True)
class PromptCandidate:
    source: str
    heading: str | None
    text: str


def display_source(source: str) -> str:
    """What the model sees of a source: its last two path parts ("scifact/corpus.jsonl#42", "docs/setup.md")."""
    return "/".join([part for part in source.split("/") if part][-2:])


def cut_to_tokens(text: str, budget: int) -> str:
    """`text` cut to about `budget` tokens (the same estimate as the retrieval budget), marked with …"""
    if approx_tokens(text) <= budget:
        return text
    return text[: budget * 4].rstrip() + " …"


def render_messages(
    query: str, candidates: list[PromptCandidate], k: int = DEFAULT_K, chunk_tokens: int = 200
) -> list[dict[str, str]]:
    """The chat messages [system, user] the selector is trained on and served with."""
    n = len(candidates)
    system = SYSTEM_TEMPLATE.format(n=n, k=k, schema=json.dumps(output_schema(n, k), separators=(",", ":")))
    parts = [f"Query: {query.strip()}", "", "Candidates:"]
    for i, c in enumerate(candidates, start=1):
        head = f" — {c.heading}" if c.heading else ""
        parts += ["", f"[{i}] {display_source(c.source)}{head}", cut_to_tokens(c.text.strip(), chunk_tokens)]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def render_answer(selected: list[int]) -> str:
    """The assistant turn for training: the canonical serialisation of a selection."""
    return json.dumps({"selected": list(selected)})


@dataclass(frozen=True)
class Selection:
    selected: tuple[int, ...]  # 1-based candidate numbers, most relevant first
    status: str  # "ok" | "repaired" | "fallback"
    problem: str | None = None  # what was wrong, for the counters and the logs


def similarity_order(n: int, k: int = DEFAULT_K) -> tuple[int, ...]:
    return tuple(range(1, min(n, k) + 1))


def parse_selection(raw: str, n: int, k: int = DEFAULT_K) -> Selection:
    """Read a selector's output for N candidates; never raises."""
    ok, obj, problem = _load_json(raw)
    if not ok:
        return Selection(similarity_order(n, k), "fallback", problem)
    items = obj.get("selected") if isinstance(obj, dict) else obj if isinstance(obj, list) else None
    if not isinstance(items, list):
        return Selection(similarity_order(n, k), "fallback", "no 'selected' list")
    if not items:
        return Selection((), "ok" if problem is None else "repaired", problem)
    picked: list[int] = []
    dropped = []
    for item in items:
        i = _as_int(item)
        if i is None or not 1 <= i <= n or i in picked:
            dropped.append(repr(item)[:20])
        else:
            picked.append(i)
    problems = [p for p in (problem, f"dropped {', '.join(dropped)}" if dropped else None,
                            f"kept first {k} of {len(picked)}" if len(picked) > k else None) if p]  # fmt: skip
    if not picked:
        return Selection(similarity_order(n, k), "fallback", "; ".join(problems))
    status = "ok" if not problems and isinstance(obj, dict) else "repaired"
    if not isinstance(obj, dict):
        problems.append("bare list instead of an object")
    return Selection(tuple(picked[:k]), status, "; ".join(problems) or None)


def _load_json(raw: str) -> tuple[bool, object, str | None]:
    text = (raw or "").strip()
    try:
        return True, json.loads(text), None
    except (json.JSONDecodeError, RecursionError):
        pass
    # prose or code fences around the JSON: take the first object or list that parses
    for m in re.finditer(r"[\[{]", text):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[m.start() :])
            return True, obj, "JSON embedded in other text"
        except (json.JSONDecodeError, RecursionError):
            continue
    return False, None, "not JSON"


def _as_int(item: object) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, float) and item.is_integer():
        return int(item)
    if isinstance(item, str) and item.strip().lstrip("[").rstrip("]").isdigit():
        return int(item.strip().lstrip("[").rstrip("]"))
    return None
