"""The learned ranker selector (stage `train_ranker`'s model): embeds the query and the candidates with
the base model (the store's), passes the query through the learned adapter, and answers the contract's
`{"selected": [...]}` with the k best candidates by the fitted weights of `retrieval.contracts.ranking_features`,
gated by the query's affinity to the feedback's train queries (a query unlike them gets the general weights).

No generation, so no parse can fail; ties keep retrieval order. It answers inline (a few ms): in the
service every candidate carries the vector stored beside its chunk and the query comes with the vector the
search already computed, so nothing is embedded on the query path. A candidate without a vector (a
benchmark's, an evaluation's) is embedded from its passage text (`retrieval.contracts.passage.passage_text`, what
ingest embeds) through the machine's vector cache, and counted in `embedded`.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.contracts.passage import passage_text
from retrieval.contracts.ranking_features import (
    FEATURES,
    SERVED_FORMATS,
    domain_affinity,
    domain_gate,
    features,
    gated_scores,
    general_floor,
)
from retrieval.contracts.recalled import RECALL_FLOOR, recalled_feature
from retrieval.contracts.selection import PromptCandidate, render_answer
from retrieval.embed import DIM, get_embedder

from .interface import SelectorLoadError

ADAPTER_FILE, QUERIES_FILE, CONFIG_FILE = "adapter.npy", "queries.npy", "ranker_config.json"


def _finite(x) -> bool:
    try:
        return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    except OverflowError:  # an integer beyond float
        return False


class RankerSelector:
    """A `train_ranker` output folder (adapter.npy, ranker_config.json) served as a selector."""

    answers_inline = True  # a few ms a query: the service waits for it

    def __init__(self, model_dir: Path, version: str):
        model_dir = Path(model_dir)
        try:
            cfg = json.loads((model_dir / CONFIG_FILE).read_text())
            self.adapter = np.load(model_dir / ADAPTER_FILE).astype(np.float32)
            self.train_queries = np.load(model_dir / QUERIES_FILE).astype(np.float32)
        except (OSError, ValueError) as e:  # no config = no finished training run in this folder
            raise SelectorLoadError(f"not a trained ranker folder: {model_dir}: {e}") from e
        if not isinstance(cfg, dict):
            raise SelectorLoadError(f"{model_dir}: {CONFIG_FILE} is not a JSON object")
        if cfg.get("input_format") not in SERVED_FORMATS:
            raise SelectorLoadError(
                f"{model_dir}: input format {cfg.get('input_format')!r}, this service computes {' or '.join(SERVED_FORMATS)}"
            )
        weights, general, gate = cfg.get("weights"), cfg.get("general_weights"), cfg.get("domain_gate")
        if not all(isinstance(x, dict) for x in (weights, general, gate)) or not {"k", "lo", "hi"} <= set(gate):
            raise SelectorLoadError(f"{model_dir}: no fusion weights, general weights or domain gate in {CONFIG_FILE}")
        if self.adapter.shape != (DIM, DIM) or self.train_queries.ndim != 2 or self.train_queries.shape[1:] != (DIM,):
            raise SelectorLoadError(
                f"{model_dir}: an adapter of shape {self.adapter.shape} or gate queries of shape "
                f"{self.train_queries.shape}, not {(DIM, DIM)} and (n, {DIM})"
            )
        numbers = [
            *(weights.get(n, 0.0) for n in FEATURES),
            *(general.get(n, 0.0) for n in FEATURES),
            gate["lo"],
            gate["hi"],
        ]
        if not all(_finite(x) for x in numbers) or not (isinstance(gate["k"], int) and 1 <= gate["k"] <= 100_000):
            raise SelectorLoadError(f"{model_dir}: a weight or gate value in {CONFIG_FILE} is not a finite number")
        self.weights = {name: float(weights.get(name, 0.0)) for name in FEATURES}
        self.general = {name: float(general.get(name, 0.0)) for name in FEATURES}
        self.gate_k, self.gate_lo, self.gate_hi = int(gate["k"]), float(gate["lo"]), float(gate["hi"])
        floor = cfg.get("bm25_sd_floor", 0.0)  # rankers saved before the floor: plain standardisation, as trained
        if not _finite(floor) or floor < 0:
            raise SelectorLoadError(f"{model_dir}: bm25_sd_floor {floor!r} is not a number >= 0")
        self.bm25_sd_floor = float(floor)
        # rankers saved before the per-query general floor: the general weights' BM25 under bm25_sd_floor, as trained
        # and before the rare-word share: rare_ramp 0, words outside the embedder's vocabulary not read
        plain, ramp, rare = cfg.get("general_plain_floor", floor), cfg.get("name_ramp", 0.0), cfg.get("rare_ramp", 0.0)
        if not (_finite(plain) and plain >= 0 and all(_finite(x) and 0 <= x <= 1 for x in (ramp, rare))):
            raise SelectorLoadError(
                f"{model_dir}: general_plain_floor {plain!r} or name_ramp {ramp!r} or rare_ramp {rare!r} out of range"
            )
        self.general_plain_floor, self.name_ramp, self.rare_ramp = float(plain), float(ramp), float(rare)
        # rankers saved before `recalled`: no weight on it, so no threshold is read
        threshold = cfg.get("recall_threshold", 1.0)
        if not (_finite(threshold) and RECALL_FLOOR <= threshold <= 1):
            raise SelectorLoadError(f"{model_dir}: recall_threshold {threshold!r} is not in [{RECALL_FLOOR}, 1]")
        self.recall_threshold = float(threshold)
        self.embedder = get_embedder()
        self.version = version
        self._lock = threading.Lock()  # one forward pass at a time: on a few cores concurrent ones only fight
        self.embedded: Counter = Counter()  # texts it had to embed itself: "queries", "candidates" (shown in /stats)

    def fitted_share(self, query_vec: np.ndarray) -> float:
        """The domain gate: the fitted weights' share for this query (1 in the feedback's domain, 0 far from it)."""
        return domain_gate(domain_affinity(query_vec, self.train_queries, self.gate_k), self.gate_lo, self.gate_hi)

    def vectors(
        self, query: str, candidates: Sequence[PromptCandidate], query_vec: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(query vector, candidate vectors): those given (the stored ones), the rest embedded and counted."""
        missing = [i for i, c in enumerate(candidates) if c.vector is None]
        vecs = np.zeros((len(candidates), DIM), dtype=np.float32)
        for i, c in enumerate(candidates):
            if c.vector is not None:
                vecs[i] = c.vector
        if query_vec is None or missing:
            with self._lock:
                if query_vec is None:
                    query_vec = self.embedder.encode([query])[0]
                    self.embedded["queries"] += 1
                if missing:
                    texts = [
                        passage_text(candidates[i].heading, candidates[i].text, candidates[i].parent_heading)
                        for i in missing
                    ]
                    vecs[missing] = self.embedder.encode_passages(texts)
                    self.embedded["candidates"] += len(missing)
        return np.asarray(query_vec, dtype=np.float32), vecs

    def scores(
        self, query: str, candidates: Sequence[PromptCandidate], query_vec: np.ndarray | None = None
    ) -> np.ndarray:
        q, vecs = self.vectors(query, candidates, query_vec)
        texts = [passage_text(c.heading, c.text, c.parent_heading) for c in candidates]
        lexical = bool(self.weights.get("bm25") or self.general.get("bm25"))
        share = self.fitted_share(q)
        feats = features(
            query,
            q,
            vecs,
            texts,
            self.adapter,
            lexical=lexical,
            bm25_sd_floor=self.bm25_sd_floor,
            general_bm25_floor=None
            if share >= 1.0
            else general_floor(query, self.bm25_sd_floor, self.general_plain_floor, self.name_ramp, self.rare_ramp),
            recalled=recalled_feature([c.recalled for c in candidates], self.recall_threshold)
            if self.weights["recalled"] or self.general["recalled"]
            else None,
        )
        return gated_scores(feats, self.weights, self.general, share)

    def answer(
        self, query: str, candidates: Sequence[PromptCandidate], k: int, query_vec: np.ndarray | None = None
    ) -> str:
        if not candidates:
            return render_answer([])
        s = self.scores(query, candidates, query_vec)
        best = sorted(range(len(s)), key=lambda i: (-s[i], i))[: max(k, 0)]
        return render_answer([i + 1 for i in best])

    def close(self) -> None:
        pass
