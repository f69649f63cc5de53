"""The learned ranker selector (stage `train_ranker`'s model): embeds the query and the candidates with
the base model (the store's), passes the query through the learned adapter, and answers the contract's
`{"selected": [...]}` with the k best candidates by the fitted weights of `retrieval.ranking_features`,
gated by the query's affinity to the feedback's train queries (a query unlike them gets the general weights).

No generation, so no parse can fail; ties keep retrieval order. Candidate vectors come through the
machine's vector cache (`Embedder.encode_passages`): a chunk embedded at ingest is looked up, not embedded again.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.ce_input import ce_passage
from retrieval.embed import DIM, get_embedder
from retrieval.ranking_features import (
    FEATURES,
    RANKER_FORMAT,
    domain_affinity,
    domain_gate,
    features,
    gated_scores,
)
from retrieval.selection import PromptCandidate, render_answer

from .interface import SelectorLoadError

ADAPTER_FILE, QUERIES_FILE, CONFIG_FILE = "adapter.npy", "queries.npy", "ranker_config.json"


def _finite(x) -> bool:
    try:
        return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    except OverflowError:  # an integer beyond float
        return False


class RankerSelector:
    """A `train_ranker` output folder (adapter.npy, ranker_config.json) served as a selector."""

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
        if cfg.get("input_format") != RANKER_FORMAT:
            raise SelectorLoadError(
                f"{model_dir}: input format {cfg.get('input_format')!r}, this service computes {RANKER_FORMAT!r}"
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
        self.embedder = get_embedder()
        self.version = version
        self._lock = threading.Lock()  # one forward pass at a time: on a few cores concurrent ones only fight

    def gate(self, query_vec: np.ndarray) -> float:
        """The fitted weights' share for this query (1 in the feedback's domain, 0 far from it)."""
        return domain_gate(domain_affinity(query_vec, self.train_queries, self.gate_k), self.gate_lo, self.gate_hi)

    def scores(self, query: str, candidates: Sequence[PromptCandidate]) -> np.ndarray:
        texts = [ce_passage(c.heading, c.text) for c in candidates]
        with self._lock:
            q = self.embedder.encode([query])[0]
            vecs = self.embedder.encode_passages(texts)
        lexical = bool(self.weights.get("bm25") or self.general.get("bm25"))
        feats = features(query, q, vecs, texts, self.adapter, lexical=lexical, bm25_sd_floor=self.bm25_sd_floor)
        return gated_scores(feats, self.weights, self.general, self.gate(q))

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int) -> str:
        if not candidates:
            return render_answer([])
        s = self.scores(query, candidates)
        best = sorted(range(len(s)), key=lambda i: (-s[i], i))[: max(k, 0)]
        return render_answer([i + 1 for i in best])

    def close(self) -> None:
        pass
