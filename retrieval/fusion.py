"""The general order, defined once: how a store orders its candidates before it has learned anything. The first
stage orders its fused top-k by it (`retrieval.query.search`, `search.fusion: general`), and a learned ranker's
*general weights* score by it out of the feedback's domain (`retrieval.contracts.ranking_features`).

score = standardised cosine + `bm25_weight` x BM25 over the candidates, standardised by max(sd, floor), the floor
chosen per query (`general_floor`): lexical matching is decisive for *names* (people, places, products, acronyms,
identifiers: words a small embedding model blurs) and weak evidence for ordinary words, which a lexical distractor
shares as well as the answer does. A query whose words after the first carry capitals (`name_share` at or above
`name_ramp`) gets `names_floor`, a query in plain words `plain_floor` (BM25 keeps its raw size below one rare
word's worth of evidence instead of being standardised into a full-weight feature), linear between. The same
holds for words the embedder has no token for (`rare_share` at or above `rare_ramp`: jargon, coinages, product and
gene names written in lower case): it sees them only as word pieces, and blurs them as it blurs names, while a
query in its own vocabulary (a docstring's, a paraphrase's ordinary words) is one cosine reads as well as it reads
anything. The floor follows the larger of the two shares. Caseless scripts count as plain words: the
cosine-leaning order. Reciprocal-rank fusion of the two rankings, what the first
stage ordered by before, counts a weak keyword ranking as much as the vector one; this order lets BM25 move a
candidate only as far as its evidence goes.

Also here, as the rule reads it: BM25 of a query against a handful of candidates (bm25s's scores).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .embed import model_path
from .params import SearchParams

_BM25_WORD = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's defaults: lowercased words of 2+ characters, stopwords out
_WORD = re.compile(r"[^\W\d_][\w'-]*")  # a word starts with a letter


@dataclass(frozen=True)
class GeneralRule:
    """The general order's numbers (search.general_* in params.yaml; train_ranker's general_bm25, bm25_sd_floor,
    general_plain_floor, name_ramp and rare_ramp are the same numbers, for the rankers it saves)."""

    bm25_weight: float = 1.0
    names_floor: float = 0.2
    plain_floor: float = 2.0
    name_ramp: float = 0.2
    rare_ramp: float = 0.3

    @classmethod
    def of(cls, search: SearchParams) -> GeneralRule:
        """The rule as params.yaml's `search` section sets it."""
        return cls(
            search.general_bm25,
            search.general_names_floor,
            search.general_plain_floor,
            search.name_ramp,
            search.rare_ramp,
        )


@functools.cache
def _bm25_stopwords() -> frozenset[str]:
    # heavy (bm25s loads numba and scipy, ~0.5 s): at first use, not with `pai --help`
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def bm25_terms(text: str) -> list[str]:
    stop = _bm25_stopwords()
    return [w for w in _BM25_WORD.findall(text.lower()) if w not in stop]


def bm25_raw(query: str, texts: list[str], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 of `query` against the candidates alone (their own idf): bm25s's scores (Lucene variant, its default
    tokenizer), computed directly: bm25s builds a sparse index, which costs more than the scoring on 20 passages."""
    docs = [Counter(bm25_terms(t)) for t in texts]
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    raw = np.zeros(len(texts))
    if lengths.sum() > 0:
        norm = k1 * ((1 - b) + b * lengths / lengths.mean())
        for word in bm25_terms(query):  # a repeated query word counts each time, as in bm25s
            tf = np.array([d.get(word, 0) for d in docs], dtype=np.float64)
            df = int(np.count_nonzero(tf))
            if df:
                raw += math.log(1 + (len(docs) - df + 0.5) / (df + 0.5)) * tf / (norm + tf)
    return raw


def floored(raw: np.ndarray, sd_floor: float = 0.0) -> list[float]:
    """(raw - mean) / max(sd, sd_floor); all 0 when the scores do not differ."""
    sd = raw.std() if len(raw) else 0.0
    return [0.0] * len(raw) if sd < 1e-9 else [float(x) for x in (raw - raw.mean()) / max(sd, sd_floor)]


def standardise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)


def name_share(query: str) -> float:
    """The share of the query's words after its first that start with a capital letter (names, acronyms,
    identifiers); 0 for a query of one word or in a caseless script."""
    words = _WORD.findall(query)[1:]
    return sum(w[0].isupper() for w in words) / len(words) if words else 0.0


@functools.cache
def _embedder_vocabulary() -> frozenset[str]:
    # the embedder's WordPiece vocabulary (30,522 entries, read once): a word in it is one token to the model
    with (model_path() / "vocab.txt").open(encoding="utf-8") as f:
        return frozenset(line.rstrip("\n") for line in f)


def _unaccented(word: str) -> str:
    # as the embedder's tokenizer reads a word: accents stripped (it lowercases, as bm25_terms does)
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def rare_share(query: str) -> float:
    """The share of the query's words (BM25's terms that start with a cased letter: not numbers, not caseless
    scripts) that are not one token of the embedder's vocabulary; 0 for a query without such words."""
    words = [w for w in bm25_terms(query) if w[0].islower()]
    if not words:
        return 0.0
    vocabulary = _embedder_vocabulary()
    return sum(_unaccented(w) not in vocabulary for w in words) / len(words)


def general_floor(
    query: str, names_floor: float, plain_floor: float, name_ramp: float, rare_ramp: float = 0.0
) -> float:
    """The general order's BM25 sd floor for `query`: `names_floor` at a name share of `name_ramp` or more, or a rare
    share of `rare_ramp` or more, `plain_floor` at neither, linear between (name_ramp 0: `names_floor` always;
    rare_ramp 0: rare words are not read, the rule of rankers saved before it)."""
    share = 1.0 if name_ramp <= 0 else min(1.0, name_share(query) / name_ramp)
    if rare_ramp > 0 and share < 1.0:
        share = max(share, min(1.0, rare_share(query) / rare_ramp))
    return plain_floor + (names_floor - plain_floor) * share


def general_scores(query: str, cosines: np.ndarray, texts: list[str], rule: GeneralRule = GeneralRule()) -> np.ndarray:
    """The general order's score of each candidate (`cosines`: the query's cosine to each, `texts` as BM25 reads
    them); order the candidates by it, ties in the given order."""
    return combined(query, cosines, bm25_raw(query, texts) if len(texts) else np.zeros(0), rule)


def combined(query: str, cosines: np.ndarray, raw: np.ndarray, rule: GeneralRule) -> np.ndarray:
    """`general_scores` from the candidates' raw BM25 (`bm25_raw`)."""
    if not len(raw):
        return np.zeros(0)
    floor = general_floor(query, rule.names_floor, rule.plain_floor, rule.name_ramp, rule.rare_ramp)
    return standardise(cosines) + rule.bm25_weight * np.asarray(floored(raw, floor))


def general_order(query: str, cosines: np.ndarray, texts: list[str], rule: GeneralRule = GeneralRule()) -> list[int]:
    """Candidate positions in the general order (`general_scores`, stable)."""
    return [int(i) for i in np.argsort(-general_scores(query, cosines, texts, rule), kind="stable")]
