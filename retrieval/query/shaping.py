"""Shaping a context of conversation chunks (params `search.conversation_tokens`). A question about a
conversation often needs what was said in several places, and a conversation's chunks are small windows of
turns, while a selector picks a number of chunks: so a pick that leads with a conversation's chunk is topped up
with the next conversation chunks of the first-stage order until the context holds that many tokens.

Chunks that are not a conversation's (notes, code, corpora) are never added: the shape of their context stays
the selector's. (A session cap and a neighbour expansion were measured and lost: docs/measurements.md,
"Conversation memory".)"""

from __future__ import annotations

from ..dialogue import session_key
from .search import Candidate


def fill(chosen: list[Candidate], shown: list[Candidate], tokens: int) -> list[Candidate]:
    """`chosen`, then, when it leads with a conversation's chunk, the next conversation chunks of `shown` (first-
    stage order) while the whole stays within `tokens`."""
    if tokens <= 0 or not chosen or session_key(chosen[0].source, chosen[0].text) is None:
        return chosen
    out, used, ids = list(chosen), sum(c.tokens for c in chosen), {c.chunk_id for c in chosen}
    for c in shown:
        if c.chunk_id in ids or session_key(c.source, c.text) is None or used + c.tokens > tokens:
            continue
        out.append(c)
        used += c.tokens
    return out
