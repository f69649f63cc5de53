"""What past questions like this one cited: the learned ranker's `recalled` feature, computed alike by training,
evaluation and serving.

A memory in use is asked the same things again in other words: a claim and its negation, a question asked again a
week later in new words, a colleague's version of it. The log keeps which chunks the consumer cited for each past
question. A new query's candidate has *evidence*: one (similarity, share) for each past question that cited it,
where similarity is the cosine of the two questions' embeddings (at least `RECALL_FLOOR`), and share is the part
of that question's askings whose answer cited the chunk. A query rated -1 cites nothing here, as `used.void_thumbs_down`
voids it for training. The feature is the strongest piece, max over the evidence of kernel(similarity) x share; the
kernel rises from 0 at the ranker's `recall_threshold` to 1 at an identical question. The feature is raw, not
standardised like the others: most candidates have no evidence, and one weak piece must not become a full-weight
feature.

A query's own text is never its own evidence: training reads each question's feature from the other questions
(one question left out), and serving does the same, so what the fit learned is what is served. Evidence comes
from the query's own scopes only.
- serving: `retrieval.logs.recall.evidence` reads the log's tables (the queries' stored embeddings);
- training and evaluation: `Bank`, built from the pulled log's records.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

RECALL_FLOOR = 0.5  # past questions less similar than this are never read (the service's lookup stops there)
RECALL_NEIGHBOURS = 32  # the past questions (distinct texts) read per query at most, nearest first

Evidence = tuple[tuple[float, float], ...]  # (similarity, share) of each past question that cited a candidate


def cited(candidate: dict, rating: int | None) -> bool:
    """A logged candidate counts as cited by its question: used, in a query not rated -1."""
    return bool(candidate.get("used")) and rating != -1


def recalled_feature(evidence: Sequence[Evidence], threshold: float) -> np.ndarray:
    """Per candidate: max over its evidence of kernel(similarity) x share, the kernel (s - threshold) / (1 -
    threshold) above `threshold` (capped at 1), else 0; 0 without evidence; all 0 at a threshold of 1 (off)."""
    if threshold >= 1.0:
        return np.zeros(len(evidence))
    span = 1.0 - threshold
    return np.array(
        [max((min(1.0, max(0.0, (s - threshold) / span)) * share for s, share in ev), default=0.0) for ev in evidence],
        dtype=np.float64,
    )


@dataclass
class Bank:
    """The log's questions that cited something, for training and evaluation: each distinct (scope, text) once, its
    unit query vector, and the share of its askings that cited each chunk (by chunk id, as a string)."""

    texts: list[str]
    scopes: list[str | None]
    vecs: np.ndarray
    cites: list[dict[str, float]] = field(default_factory=list)

    @classmethod
    def from_records(cls, records: Sequence[dict], embed: Callable[[list[str]], np.ndarray]) -> Bank:
        """From pulled feedback records as the log holds them (`used` as stored, `rating`); `embed` gives the
        query vectors (all-MiniLM-L6-v2, as the service stores them)."""
        asked: Counter = Counter()
        hits: dict[tuple, Counter] = defaultdict(Counter)
        for r in records:
            key = (r.get("scope"), r["query"])
            asked[key] += 1
            for c in r.get("candidates") or ():
                if c.get("chunk_id") is not None and cited(c, r.get("rating")):
                    hits[key][str(c["chunk_id"])] += 1
        keys = [k for k in asked if hits[k]]
        vecs = embed([t for _, t in keys]) if keys else np.zeros((0, 384), dtype=np.float32)
        vecs = np.asarray(vecs, dtype=np.float32)
        if len(vecs):
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return cls(
            texts=[t for _, t in keys],
            scopes=[s for s, _ in keys],
            vecs=vecs,
            cites=[{c: n / asked[k] for c, n in hits[k].items()} for k in keys],
        )

    def evidence(self, text: str, qvec: np.ndarray, ids: Sequence[str], scope: str | None = None) -> list[Evidence]:
        """Each candidate's evidence (by its chunk id, `ids`) for the question `text` (vector `qvec`): of the
        RECALL_NEIGHBOURS other questions of `scope` (None: any) nearest to it and at least RECALL_FLOOR similar,
        those that cited it."""
        if not len(self.texts) or not len(ids):
            return [() for _ in ids]
        q = np.asarray(qvec, dtype=np.float32)
        sims = self.vecs @ (q / max(float(np.linalg.norm(q)), 1e-12))
        near = [
            j
            for j in np.argsort(-sims, kind="stable")
            if sims[j] >= RECALL_FLOOR and self.texts[j] != text and (scope is None or self.scopes[j] in (None, scope))
        ][:RECALL_NEIGHBOURS]
        wanted = {str(i) for i in ids}
        out: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for j in near:
            for chunk, share in self.cites[j].items():
                if chunk in wanted:
                    out[chunk].append((float(sims[j]), share))
        return [tuple(out.get(str(i), ())) for i in ids]
