"""Shaping a context of conversation chunks (params `search.conversation_tokens`, `search.conversation_turns`). A
question about a conversation often needs what was said in several places, and a conversation's chunks are small
windows of turns, while a selector picks a number of chunks: so a pick that leads with a conversation's chunk is
topped up with the next conversation chunks of the first-stage order until the context holds that many tokens.
With `conversation_turns`, each chunk the fill adds is first trimmed to its turns that match the query best (its
dated header line stays), so the tokens hold turns of more windows; the selector's pick stays whole.

Chunks that are not a conversation's (notes, code, corpora) are never added nor trimmed: the shape of their
context stays the selector's. (A session cap and a neighbour expansion were measured and lost: docs/measurements.md,
"Conversation memory".)"""

from __future__ import annotations

from dataclasses import replace

from retrieval.chunking import approx_tokens
from retrieval.dialogue import session_key, split_turns
from retrieval.fusion import bm25_raw, bm25_terms
from retrieval.query.search import Candidate

# a question's own words, which match the questions asked in a conversation rather than what answers them
ASKING = frozenset(
    "what when where who whom whose which why how did does do done would could should can has have had was were am "  # noqa: SIM905
    "you your yours me my i we our us he she his her him they them their".split()
)


def fill(
    chosen: list[Candidate], shown: list[Candidate], tokens: int, query: str = "", turns: int = 0
) -> list[Candidate]:
    """`chosen`, then, when it leads with a conversation's chunk, the next conversation chunks of `shown` (first-
    stage order) while the whole stays within `tokens`; with `turns` > 0, each chunk it adds is trimmed first
    (`trim`)."""
    if tokens <= 0 or not chosen or session_key(chosen[0].source, chosen[0].text) is None:
        return chosen
    out, used, ids = list(chosen), sum(c.tokens for c in chosen), {c.chunk_id for c in chosen}
    if turns > 0 and query.strip():
        cut = trim(query, shown, turns)
        shown = [c if c.chunk_id in ids else cut.get(c.chunk_id, c) for c in shown]
    for c in shown:
        if c.chunk_id in ids or session_key(c.source, c.text) is None or used + c.tokens > tokens:
            continue
        out.append(c)
        ids.add(c.chunk_id)
        used += c.tokens
    return out


def trim(query: str, candidates: list[Candidate], turns: int) -> dict[int, Candidate]:
    """chunk id -> the conversation chunk cut to at most `turns` adjacent turns: its best turn by BM25 of the query
    over all the candidates' turns (their own idf), grown toward the better-scoring neighbour (on a tie, the turn
    after: an answer). The header line stays; a chunk whose turns match no query word stays whole."""
    split = {c.chunk_id: (c, s) for c in candidates if (s := split_turns(c.text)) is not None}
    texts = [t for _, (_, ts) in split.values() for t in ts]
    words = [w for w in bm25_terms(query) if w not in ASKING]
    if not texts or not words:
        return {}
    scores, out, at = bm25_raw(" ".join(words), texts), {}, 0
    for cid, (c, (head, ts)) in split.items():
        mine, at = list(scores[at : at + len(ts)]), at + len(ts)
        if len(ts) <= turns or max(mine) <= 0:
            continue
        lo = hi = max(range(len(ts)), key=lambda j: mine[j])
        while hi - lo + 1 < turns:
            asked = ts[hi].rstrip().endswith("?")  # a question's answer comes first
            after = (mine[hi + 1] + (1e9 if asked else 0.0)) if hi + 1 < len(ts) else -1.0
            before = mine[lo - 1] if lo > 0 else -1.0
            lo, hi = (lo, hi + 1) if after >= before else (lo - 1, hi)
        text = "\n".join([head, *ts[lo : hi + 1]])
        out[cid] = replace(c, text=text, tokens=approx_tokens(text))
    return out
