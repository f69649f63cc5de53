"""The selection contract (docs/architecture.md, "Contracts" 1 and 2): one prompt format and one output parser,
shared by training, evaluation and serving. Change either only with a PROMPT_VERSION bump.

The selector sees the query and candidates numbered 1..N and answers `{"selected": [i, ...]}`:
unique candidate numbers, at most k, most relevant first. `parse_selection` never raises: output
that cannot be used as is gets repaired (bad items dropped) or replaced by the first-stage order
(the candidates as handed over), and the result says which happened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..chunking import approx_tokens

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


@dataclass(frozen=True)
class PromptCandidate:
    source: str
    heading: str | None
    text: str
    parent_heading: str | None = None  # the heading path's upper part (nested markdown headings)
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)  # the stored embedding, if known
    # what past questions like the query cited of it: (similarity, share) each (`retrieval.contracts.recalled`)
    recalled: tuple[tuple[float, float], ...] = field(default=(), compare=False, repr=False)


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


@dataclass(frozen=True)
class Pick:
    """What a selector picked for one query, in the candidates' own ids (chunk ids in the service,
    benchmark ids in evaluation), best first; how its answer parsed (a `Selection`'s status) and how
    long it took. The service also records which version made it and the picked candidates' ranks."""

    ids: tuple  # the picked candidates' ids, most relevant first
    status: str = "ok"  # ok | repaired | fallback
    seconds: float = 0.0
    version: str | None = None  # the selector that made it (the service's feedback log records it)
    ranks: tuple[int, ...] = ()  # the picked candidates' retrieval ranks (service)
    topped_up: int = 0  # candidates the context's floor added from the first-stage order (`top_up`)


FIRST_STAGE = "first-stage"
"""the version, record kind and `pai promote` word of the first-stage order served as is (no selector)"""
OLD_FIRST_STAGE = "similarity"  # its name before issue 59, in records stored then: read as FIRST_STAGE, never written


def current_name(version: str | None) -> str | None:
    """A served-by version as named now: the first-stage order's old name (`OLD_FIRST_STAGE`) read as `FIRST_STAGE`."""
    return FIRST_STAGE if version == OLD_FIRST_STAGE else version


def current_record(record: dict) -> dict:
    """A version record (registry, deployment, trial) as named now: its kind and version, and a cascade's parts."""
    out = {**record, **{k: current_name(record[k]) for k in ("kind", "version") if k in record}}
    return out | {k: current_record(record[k]) for k in ("fast", "slow") if isinstance(record.get(k), dict)}


def first_stage_order(n: int, k: int = DEFAULT_K) -> tuple[int, ...]:
    """The first `k` of `n` candidates as the first stage handed them over: what serves without a selector."""
    return tuple(range(1, min(n, k) + 1))


def top_up(selected: Sequence[int], n: int, floor: int) -> tuple[int, ...]:
    """The context's floor after selection: `selected` (candidate numbers 1..n), then the first-stage
    order's next numbers not among them until there are `floor` (or all n). A selector that picks one
    chunk, or none (`{"selected": []}` is valid), never leaves a context thinner than the floor."""
    out = list(dict.fromkeys(selected))
    for i in range(1, n + 1):
        if len(out) >= floor:
            break
        if i not in out:
            out.append(i)
    return tuple(out)


def parse_selection(raw: str, n: int, k: int = DEFAULT_K) -> Selection:
    """Read a selector's output for N candidates; never raises."""
    ok, obj, problem = _load_json(raw)
    if not ok:
        return Selection(first_stage_order(n, k), "fallback", problem)
    items = obj.get("selected") if isinstance(obj, dict) else obj if isinstance(obj, list) else None
    if not isinstance(items, list):
        return Selection(first_stage_order(n, k), "fallback", "no 'selected' list")
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
    problems = [
        p
        for p in (
            problem,
            f"dropped {', '.join(dropped)}" if dropped else None,
            f"kept first {k} of {len(picked)}" if len(picked) > k else None,
        )
        if p
    ]
    if not picked:
        return Selection(first_stage_order(n, k), "fallback", "; ".join(problems))
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
    digits = item.strip().lstrip("[").rstrip("]") if isinstance(item, str) else ""
    if digits.isascii() and digits.isdigit():  # "²".isdigit() is True, but int() refuses it
        return int(digits)
    return None


def choose(answer: Callable[[], str], n: int, k: int, timeout_s: float | None = None) -> tuple[Selection, str | None]:
    """A selector's answer over `n` numbered candidates, parsed by the contract: the one path from a selector to
    a selection, for the service (`serving.picker`) and evaluation alike. Whatever goes wrong (a crash, a
    timeout that `answer` raises) falls back to the first-stage order. -> (selection, None | "timeout" | "error")."""
    try:
        return parse_selection(answer(), n, k), None
    except TimeoutError:  # concurrent.futures' too, since Python 3.11
        return Selection(
            first_stage_order(n, k), "fallback", f"selector timed out after {timeout_s or 0:g} s"
        ), "timeout"
    except Exception as e:  # noqa: BLE001 - any backend failure falls back, and the caller counts it
        return Selection(
            first_stage_order(n, k), "fallback", f"selector failed: {type(e).__name__}: {e}"[:200]
        ), "error"
