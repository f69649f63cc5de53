"""The learned ranker selector (stage `train_ranker`'s model): embeds the query and the candidates with
the base model (the store's), passes the query through the learned adapter, and answers the contract's
`{"selected": [...]}` with the k best candidates by the fitted weights of `retrieval.ranking_features`.

No generation, so no parse can fail; ties keep retrieval order. Candidate vectors come through the
machine's vector cache (`Embedder.encode_passages`): a chunk embedded at ingest is looked up, not embedded again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.ce_input import ce_passage
from retrieval.embed import DIM, get_embedder
from retrieval.ranking_features import FEATURES, RANKER_FORMAT, features, ranker_scores
from retrieval.selection import PromptCandidate, render_answer

from .interface import SelectorLoadError

ADAPTER_FILE, CONFIG_FILE = "adapter.npy", "ranker_config.json"


class RankerSelector:
    """A `train_ranker` output folder (adapter.npy, ranker_config.json) served as a selector."""

    def __init__(self, model_dir: Path, version: str):
        model_dir = Path(model_dir)
        try:
            cfg = json.loads((model_dir / CONFIG_FILE).read_text())
            self.adapter = np.load(model_dir / ADAPTER_FILE).astype(np.float32)
        except (OSError, ValueError) as e:  # no config = no finished training run in this folder
            raise SelectorLoadError(f"not a trained ranker folder: {model_dir}: {e}") from e
        if cfg.get("input_format") != RANKER_FORMAT:
            raise SelectorLoadError(
                f"{model_dir}: input format {cfg.get('input_format')!r}, this service computes {RANKER_FORMAT!r}"
            )
        weights = cfg.get("weights")
        if not isinstance(weights, dict) or self.adapter.shape != (DIM, DIM):
            raise SelectorLoadError(
                f"{model_dir}: no fusion weights or an adapter of shape {self.adapter.shape}, not {(DIM, DIM)}"
            )
        self.weights = {name: float(weights.get(name, 0.0)) for name in FEATURES}
        self.embedder = get_embedder()
        self.version = version
        self._lock = threading.Lock()  # one forward pass at a time: on a few cores concurrent ones only fight

    def scores(self, query: str, candidates: Sequence[PromptCandidate]) -> np.ndarray:
        texts = [ce_passage(c.heading, c.text) for c in candidates]
        with self._lock:
            q = self.embedder.encode([query])[0]
            vecs = self.embedder.encode_passages(texts)
        feats = features(query, q, vecs, texts, self.adapter, lexical=bool(self.weights.get("bm25")))
        return ranker_scores(feats, self.weights)

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int) -> str:
        if not candidates:
            return render_answer([])
        s = self.scores(query, candidates)
        best = sorted(range(len(s)), key=lambda i: (-s[i], i))[: max(k, 0)]
        return render_answer([i + 1 for i in best])

    def close(self) -> None:
        pass
