"""Does a citation's sentence come from the chunk it cites? An assistant that uses a chunk quotes or paraphrases
it in the sentence that carries `[n]`; one that attaches `[n]` to a claim chunk n does not hold (a
misattribution: the claim came from another chunk or from the assistant itself) cited a chunk it did not use.
`citation_support` measures, per cited candidate, the share of its citing sentence's content words that the
chunk holds (containment; the sentence, not the chunk, is the denominator: a long chunk is not penalised for
what the answer left out); `uncited_support` the same for the sentences without a citation, so a chunk quoted
without its `[n]` counts as used. Every reader of the log reads the labels from the exported answer and
candidate texts (`used.used_labels`, params.yaml `used.min_uncited`), so every log that kept its answers can be
re-judged, and nothing is stored twice. A citation is never taken back by its sentence in production (a
consumer that restates the claim would lose true citations: docs/measurements.md, "Retired");
`grounding_report` (`pai lab grounding`) still measures how well a log's citations are grounded.

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


def _claims(answer: str) -> list[tuple[set[str], list[int]]]:
    """The answer's sentences as (content words, cited ranks); a sentence of citations alone (`... holds. [2]`)
    cites the sentence before it."""
    out: list[tuple[set[str], list[int]]] = []
    for sentence in _SENTENCE.split(answer):
        cited = [int(n) for n in _CITATION.findall(sentence)]
        words = content_words(_CITATION.sub(" ", sentence))
        if words or not out:
            out.append((words, cited))
        else:
            out[-1][1].extend(cited)
    return out


def _support(answer: str, texts: dict[int, str], cited: bool) -> dict[int, float]:
    support: dict[int, float] = {}
    chunk_words: dict[int, set[str]] = {}
    for words, ranks in _claims(answer):
        if len(words) < MIN_WORDS or bool(ranks) != cited:
            continue
        for n in ranks if cited else list(texts):
            if n not in texts:
                continue
            if n not in chunk_words:
                chunk_words[n] = content_words(texts[n])
            support[n] = max(support.get(n, 0.0), len(words & chunk_words[n]) / len(words))
    return support


def citation_support(answer: str, texts: dict[int, str]) -> dict[int, float]:
    """rank -> the largest share of content words a sentence citing `[rank]` shares with that candidate's text,
    for each cited rank in `texts` whose citing sentence has at least MIN_WORDS content words. A rank cited
    without such a sentence is absent: nothing to judge by, so its citation stands."""
    return _support(answer, texts, cited=True)


def uncited_support(answer: str, texts: dict[int, str]) -> dict[int, float]:
    """rank -> the largest share of content words a sentence without a citation shares with that candidate's
    text (sentences of at least MIN_WORDS content words): a chunk the answer quotes without citing it was used."""
    return _support(answer, texts, cited=False)


def shown_texts(rec: dict) -> dict[int, str]:
    """rank -> text of the candidates the consumer was shown (a judge's labels outside the context are not read
    from an answer; a candidate changed or deleted since has no text to judge by)."""
    return {c["rank"]: c["text"] for c in rec["candidates"] if c.get("text") and c.get("shown") is not False}


def regrounded(rec: dict, min_uncited: float) -> dict:
    """A pulled feedback record with its labels read again from its answer: a shown chunk left uncited that holds
    at least `min_uncited` of a sentence without a citation was used (the consumer quoted it and forgot the
    `[n]`). 0 switches it off; a record without an answer is returned as is; a citation always stands."""
    if not rec.get("answer") or min_uncited <= 0:
        return rec
    quoted = uncited_support(rec["answer"], shown_texts(rec))
    added = {r for r, s in quoted.items() if s >= min_uncited}

    def relabel(c: dict) -> dict:
        if c.get("used") is None or c.get("shown") is False:  # no label, or a judge's outside the context
            return c
        return {**c, "used": True} if not c["used"] and c["rank"] in added else c

    return {**rec, "candidates": [relabel(c) for c in rec["candidates"]]}


def best_sentence(text: str, query: str, max_chars: int = 300) -> str:
    """The sentence of `text` that shares most content words with `query` (the first on a tie), without
    bracketed numbers: what an assistant answering `query` from this chunk would quote."""
    q = content_words(query)
    text = _QUOTED_CITATION.sub("", text)  # the chunk's own bracketed numbers would read as citations of candidates
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()] or [text.strip()]
    return max(sentences, key=lambda s: len(q & content_words(s)))[:max_chars]


def grounding_report(records: list[dict], thresholds: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)) -> dict:
    """What reading the answers would change in a pulled log, to choose `min_uncited` on a real consumer's
    answers: per threshold the shown chunks left uncited that an uncited sentence would count as used; and how
    well its citations are grounded (the cited sentences' support: quantiles, and the share below each threshold)."""
    cited: list[float] = []
    quoted = dict.fromkeys(thresholds, 0)
    answers = citations = 0
    for rec in records:
        if not rec.get("answer"):
            continue
        answers += 1
        texts = shown_texts(rec)
        used = {c["rank"]: c.get("used") for c in rec["candidates"] if c["rank"] in texts}
        citations += sum(bool(u) for u in used.values())
        cited += list(citation_support(rec["answer"], texts).values())
        uncited = uncited_support(rec["answer"], texts)
        for rank in (r for r, u in used.items() if u is False):
            for t in thresholds:
                quoted[t] += uncited.get(rank, 0.0) >= t
    ordered = sorted(cited)
    at = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else None  # noqa: E731
    return {
        "answers": answers,
        "citations": citations,
        "citations_judged": len(cited),  # the rest have no sentence of MIN_WORDS content words: they stand
        "support_quantiles": {f"p{int(q * 100)}": at(q) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
        "support_below": {
            str(t): round(sum(s < t for s in cited) / len(cited), 4) if cited else 0.0 for t in thresholds
        },
        "uncited_quotes_at": {str(t): n for t, n in quoted.items()},
    }
