"""Does a citation's sentence come from the chunk it cites? An assistant that uses a chunk quotes or paraphrases
it in the sentence that carries `[n]`; one that attaches `[n]` to a claim chunk n does not hold (a
misattribution: the claim came from another chunk or from the assistant itself) cited a chunk it did not use.
`citation_support` measures, per cited candidate, the share of its citing sentence's content words that the
chunk holds (containment; the sentence, not the chunk, is the denominator: a long chunk is not penalised for
what the answer left out). Training reads it from the exported answer and candidate texts (`train_ranker.
min_support`), so every log that kept its answers can be re-judged, and nothing is stored twice.

Lexical on purpose: cheap, explainable, the same on every machine. A close paraphrase keeps most content
words; a claim about something else keeps few. Its limit: a chunk the assistant quoted although it did not
answer the question (over-citation) is grounded, and counts as used.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]{3,}")  # letters and digits, three or more: short words carry little
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CITATION = re.compile(r"\[(\d{1,3})\]")
_QUOTED_CITATION = re.compile(r"\s*\[\d{1,3}\]")
_STOP_WORDS = (
    "the and for are but not you all any can had her was one our out has have from that"
    " this with they will what when which who why how their there these those into than then them its also"
    " been being were such more most other some only very may might could would should does did doing about over under between"
)
_STOP = frozenset(_STOP_WORDS.split())
MIN_WORDS = 3  # a citing sentence with fewer content words ("From the notes [2]") says nothing to judge by


def content_words(text: str) -> set[str]:
    """Lower-cased words of three or more letters, not stop words, cut to their first five letters (truncation
    stemming: "distances" and "distance" match, as a paraphrase's inflections should)."""
    return {w[:5] for w in map(str.lower, _WORD.findall(text)) if w not in _STOP}


def citation_support(answer: str, texts: dict[int, str]) -> dict[int, float]:
    """rank -> the largest share of content words a sentence citing `[rank]` shares with that candidate's text,
    for each cited rank in `texts` whose citing sentence has at least MIN_WORDS content words (a sentence of
    citations alone, `... holds. [2]`, cites the sentence before it). A rank cited without such a sentence is
    absent: nothing to judge by, so its citation stands."""
    support: dict[int, float] = {}
    chunk_words: dict[int, set[str]] = {}
    previous: set[str] = set()
    for sentence in _SENTENCE.split(answer):
        cited = [int(n) for n in _CITATION.findall(sentence)]
        words = content_words(_CITATION.sub(" ", sentence))
        if words:
            previous = words
        else:
            words = previous
        if len(words) < MIN_WORDS:
            continue
        for n in cited:
            if n not in texts:
                continue
            if n not in chunk_words:
                chunk_words[n] = content_words(texts[n])
            support[n] = max(support.get(n, 0.0), len(words & chunk_words[n]) / len(words))
    return support


def void_misattributed(rec: dict, min_support: float) -> dict:
    """A pulled feedback record with every citation whose sentence holds less than `min_support` of its
    content words in the chunk it cites marked not used (shown, not cited: the consumer did not use it).
    Returned as is where `min_support` is 0, the record has no answer, or every citation is grounded."""
    if min_support <= 0 or not rec.get("answer"):
        return rec
    support = citation_support(rec["answer"], {c["rank"]: c["text"] for c in rec["candidates"] if c.get("text")})
    if all(s >= min_support for s in support.values()):
        return rec
    return {
        **rec,
        "candidates": [
            {**c, "used": False} if c.get("used") and support.get(c["rank"], 1.0) < min_support else c
            for c in rec["candidates"]
        ],
    }


def misattributed(records: list[dict], min_support: float) -> int:
    """How many citations `void_misattributed` takes back over `records`."""
    return sum(
        bool(a.get("used")) and not b.get("used")
        for r in records
        for a, b in zip(r["candidates"], void_misattributed(r, min_support)["candidates"])
    )


def best_sentence(text: str, query: str, max_chars: int = 300) -> str:
    """The sentence of `text` that shares most content words with `query` (the first on a tie), without
    bracketed numbers: what an assistant answering `query` from this chunk would quote."""
    q = content_words(query)
    text = _QUOTED_CITATION.sub("", text)  # the chunk's own bracketed numbers would read as citations of candidates
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()] or [text.strip()]
    return max(sentences, key=lambda s: len(q & content_words(s)))[:max_chars]
