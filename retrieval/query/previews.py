"""Previews: after the context, the next candidates as one line each (where it is from, its heading, its first words),
so the consumer sees more than it is given and can read one whole (`expand`). What it expands or cites of them is a
label below the context's cut, the part of the order the log otherwise never speaks of (issue 55). Pure: the picker
chooses which candidates, the service logs them, this module says which follow the context and how each reads."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import TypeVar

from .search import Candidate

T = TypeVar("T")

_SPACE = re.compile(r"\s+")


def _chunk(c: Candidate) -> Hashable:
    return c.chunk_id


def following(
    context: list[T], order: list[T], shown: list[T], n: int, key: Callable[[T], Hashable] = _chunk
) -> list[T]:
    """The `n` candidates after the context: the served `order` past the context first, then the rest of `shown` (the
    candidates the selector saw) in their first-stage order; none twice, none already in the context (`key` tells
    two apart: a chunk's id; the lab's items are their own keys)."""
    taken = {key(c) for c in context}
    out: list[T] = []
    for c in [*order, *shown]:
        if len(out) >= n:
            break
        if key(c) not in taken:
            taken.add(key(c))
            out.append(c)
    return out


def listed_propensity(
    planned: list[T], order: list[T], shown: list[T], n: int, rate: float, key: Callable[[T], Hashable] = _chunk
) -> dict[Hashable, float]:
    """key -> P(listed as a preview) when, with probability `rate`, the context's last slot goes to a candidate drawn
    uniformly from those below the cut (`serving.picker.Picker.expose`): the previews follow the context as drawn
    (the slot exploration took is previewed, the explored chunk is not), so each outcome of the draw is enumerated
    with its probability (one per candidate below the cut)."""
    if n <= 0:
        return {}
    in_context = {key(c) for c in planned}
    below = [c for c in shown if key(c) not in in_context]
    rate = rate if planned and below else 0.0
    outcomes = [(1.0 - rate, planned)] + [(rate / len(below), [*planned[:-1], x]) for x in below if rate]
    out: dict[Hashable, float] = {}
    for p, context in outcomes:
        for c in following(context, order, shown, n, key):
            out[key(c)] = out.get(key(c), 0.0) + p
    return {k: round(p, 6) for k, p in out.items()}


def preview_line(c: Candidate, chars: int) -> str:
    """One line of at most `chars` characters: the heading path (else the source's last path segment: the structured
    `source` beside it says where it is from), then the first words of the text; cut at a word with '…'. No
    newline, whatever the chunk holds. Every character is paid for in every prompt that lists it."""
    name = c.source.rstrip("/").rsplit("/", 1)[-1] or c.source
    heading = " › ".join(h for h in (c.parent_heading, c.heading) if h)
    body = c.text.lstrip("# ")
    if heading and body.startswith(c.heading or "\0"):  # a markdown chunk repeats its heading as its first line
        body = body[len(c.heading or "") :]
    line = _SPACE.sub(" ", f"{heading or name}: {body}").strip()
    if len(line) <= chars:
        return line
    cut = line[: chars - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[chars // 2 :] else cut).rstrip(" ,;:—›") + "…"
