"""Shaping a context of conversation chunks. A question about a conversation often needs what was said in
several sessions, and a conversation's chunks are small windows of turns, so:

- `diversify` (params `search.session_cap`): the pick keeps at most `cap` chunks of one session and gives
  the freed slots to the next candidates of other sessions, in the served order;
- `expand` (params `search.neighbours`): the windows right before and after the strongest hits, when they
  are candidates, move up to follow them (an answer often sits in the turns next to the words that matched);
- `fill` (params `search.conversation_tokens`): a pick that leads with a conversation's chunk is topped up
  with the next conversation chunks until the context holds that many tokens (the selector picks a number
  of chunks; small windows would otherwise leave the context short).

Chunks that are not a conversation's (notes, code, corpora) are never moved nor added: the shape of their
context stays the selector's."""

from __future__ import annotations

from collections import Counter

from retrieval.dialogue import session_key
from retrieval.query.search import Candidate


def diversify(chosen: list[Candidate], shown: list[Candidate], cap: int) -> list[Candidate]:
    """`chosen` (the pick, in order) with each conversation session held to `cap` chunks; the slots freed go to
    the first candidates of `shown` (first-stage order) from sessions under the cap. Same length, same order."""
    if cap <= 0:
        return chosen
    seen: Counter = Counter()
    kept, freed = [], 0
    for c in chosen:
        key = session_key(c.source, c.text)
        if key is not None and seen[key] >= cap:
            freed += 1
            continue
        seen[key] += key is not None
        kept.append(c)
    if not freed:
        return chosen
    ids = {c.chunk_id for c in chosen}
    for c in shown:
        if freed == 0:
            break
        key = session_key(c.source, c.text)
        if c.chunk_id in ids or (key is not None and seen[key] >= cap):
            continue
        seen[key] += key is not None
        kept.append(c)
        freed -= 1
    return kept


def fill(chosen: list[Candidate], shown: list[Candidate], tokens: int, cap: int = 0) -> list[Candidate]:
    """`chosen`, then, when it leads with a conversation's chunk, the next conversation chunks of `shown` (first-
    stage order; each session held to `cap` when cap > 0) while the whole stays within `tokens`."""
    if tokens <= 0 or not chosen or session_key(chosen[0].source, chosen[0].text) is None:
        return chosen
    seen = Counter(session_key(c.source, c.text) for c in chosen)
    out, used, ids = list(chosen), sum(c.tokens for c in chosen), {c.chunk_id for c in chosen}
    for c in shown:
        key = session_key(c.source, c.text)
        if c.chunk_id in ids or key is None or (cap > 0 and seen[key] >= cap) or used + c.tokens > tokens:
            continue
        out.append(c)
        seen[key] += 1
        used += c.tokens
    return out


def expand(shown: list[Candidate], hits: int) -> list[Candidate]:
    """`shown` with the neighbouring windows (same conversation session, adjacent lines) of each of its first
    `hits` conversation chunks moved up to follow it; the rest keeps its order."""
    if hits <= 0:
        return shown
    out: list[Candidate] = []
    for c in shown[:hits]:
        if c in out:
            continue
        out.append(c)
        key = session_key(c.source, c.text)
        if key is not None:
            out += [n for n in shown if n not in out and _adjacent(c, n, key)]
    return out + [c for c in shown if c not in out]


def _adjacent(c: Candidate, n: Candidate, key: tuple[str, str]) -> bool:
    near = 0 < n.start_line - c.end_line <= 2 or 0 < c.start_line - n.end_line <= 2
    return near and session_key(n.source, n.text) == key
