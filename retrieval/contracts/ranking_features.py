"""The learned ranker's input contract (RANKER_FORMAT): the features a ranker scores candidates by, and
how its fitted weights combine them. Shared by training (`training.train_ranker`), evaluation and
serving (`serving.ranker`), so the three compute the same numbers.

For one query and its candidates in retrieval order, every feature is a vector over the candidates,
standardised within them (mean 0, sd 1; 0 when they do not differ), so a weight means the same on a
list of 10 as on a list of 20:
- `similarity`: cosine of the query and passage embeddings (all-MiniLM-L6-v2, as stored);
- `adapted`: cosine after the *query adapter* (q' = q + q W, W learned from feedback, 0 = the base
  model): the domain's way of asking, learned without re-embedding a passage;
- `bm25`: BM25 of the query over the candidates (`retrieval.contracts.lexical.lexical_scores`), its sd floored at
  the ranker's `bm25_sd_floor` (0 in rankers saved before it: the plain standardisation);
- `prior`: -log(1 + position) in retrieval order (the first stage's own ranking);
- `recalled`: what past questions like this one cited (`retrieval.contracts.recalled`), raw in [0, 1], not
  standardised: most candidates have none.
score = sum of weight x feature. Weights are fitted on held-out queries; a weight of 0 drops a feature.

The fitted weights speak for the feedback's domain only, so a ranker carries a **domain gate**: a query's
*affinity* is the mean cosine of its k nearest feedback train queries (base vectors). At or above the
gate's `hi` the fitted weights score alone; at or below `lo` the *general* weights do (the base model's
cosine and BM25, the order a learned ranker must never fall below where it has learned nothing); in
between, a linear blend. So learning a corpus moves the queries that look like its feedback, not others.

The general weights' BM25 has a floor of its own, per query (`general_floor`): lexical matching is decisive
for *names* (people, places, products, acronyms, identifiers: words a 22M-parameter embedding model blurs)
and weak evidence for ordinary words (a lexical distractor shares them as well as the answer does). So a query
whose words after the first carry capitals (`name_share`, at or above `name_ramp`) keeps the fitted floor
(`bm25_sd_floor`), and a query in plain words gets `general_plain_floor`: its BM25 keeps its raw size below
one rare word's worth of evidence instead of being standardised into a full-weight feature. Words the embedder
has no token for (`rare_share`, at or above `rare_ramp`) count as names do; rankers saved before it (no
`rare_ramp`) do not read them. Caseless scripts have no capitals and count as plain words: the cosine-leaning
order, the best simple one in most domains.
"""

from __future__ import annotations

import numpy as np

from ..fusion import bm25_raw, floored, general_floor, name_share, standardise

__all__ = [
    "general_floor",
    "name_share",
    "standardise",
]  # defined in retrieval.fusion (the general order), read here too

# /2: the domain gate and general weights; /3: the general weights' per-query floor; /4: `recalled`
RANKER_FORMAT = "ranker-input/4"
# formats a service still computes: a /2 ranker has no per-query floor and is served as it was trained; /2 and /3
# have no `recalled` weight (0)
SERVED_FORMATS = ("ranker-input/2", "ranker-input/3", RANKER_FORMAT)
FEATURES = ("similarity", "adapted", "bm25", "prior", "recalled")
GENERAL_BM25 = "bm25_general"  # the general weights read their BM25 from here when `features` computed it


def adapt_query(q: np.ndarray, adapter: np.ndarray | None) -> np.ndarray:
    """The query vector through the adapter (q + q W), L2-normalised; None = the base vector."""
    if adapter is None:
        return q
    v = q + q @ adapter
    n = np.linalg.norm(v)
    return v / n if n > 0 else q


def features(
    query: str,
    query_vec: np.ndarray,
    passage_vecs: np.ndarray,
    texts: list[str],
    adapter: np.ndarray | None,
    lexical: bool = True,
    bm25_sd_floor: float = 0.0,
    general_bm25_floor: float | None = None,
    recalled: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Every feature of the candidates (rows of `passage_vecs`, in retrieval order), standardised but `recalled`
    (`retrieval.contracts.recalled.recalled_feature`; None: no evidence, 0). With `general_bm25_floor` also
    `bm25_general`: the same BM25 under the general weights' floor (`gated_scores`)."""
    n = len(texts)
    raw = bm25_raw(query, texts) if lexical and n else np.zeros(n)
    out = {
        "similarity": standardise(passage_vecs @ query_vec),
        "adapted": standardise(passage_vecs @ adapt_query(query_vec, adapter)),
        "bm25": np.asarray(floored(raw, bm25_sd_floor)),
        "prior": standardise(-np.log1p(np.arange(n))),
        "recalled": np.zeros(n) if recalled is None else np.asarray(recalled, dtype=np.float64),
    }
    if general_bm25_floor is not None:
        out[GENERAL_BM25] = np.asarray(floored(raw, general_bm25_floor))
    return out


def ranker_scores(feats: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    """The ranker's score per candidate: the weighted sum of its features."""
    n = len(next(iter(feats.values())))
    return sum((w * feats[name] for name, w in weights.items() if w), np.zeros(n))


def domain_affinity(query_vec: np.ndarray, train_vecs: np.ndarray, k: int, exclude_self: bool = False) -> float:
    """Mean cosine of the query's k nearest train queries (unit vectors); `exclude_self` drops its own copy."""
    sims = np.sort(train_vecs @ query_vec)[::-1]
    if exclude_self:
        sims = sims[1:]
    return float(sims[: max(k, 1)].mean()) if len(sims) else 0.0


def domain_gate(affinity: float, lo: float, hi: float) -> float:
    """The fitted weights' share of the score: 0 at or below `lo`, 1 at or above `hi`, linear between."""
    if hi <= lo:
        return float(affinity >= hi)
    return float(np.clip((affinity - lo) / (hi - lo), 0.0, 1.0))


def gated_scores(
    feats: dict[str, np.ndarray], weights: dict[str, float], general: dict[str, float], gate: float
) -> np.ndarray:
    """gate x the fitted fusion + (1 - gate) x the general one (its BM25 under its own floor, when computed)."""
    general_feats = feats | {"bm25": feats[GENERAL_BM25]} if GENERAL_BM25 in feats else feats
    if gate >= 1.0:
        return ranker_scores(feats, weights)
    if gate <= 0.0:
        return ranker_scores(general_feats, general)
    return gate * ranker_scores(feats, weights) + (1.0 - gate) * ranker_scores(general_feats, general)
