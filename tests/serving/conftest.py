"""Fixtures of the serving tests."""

import json

import numpy as np
import pytest

from retrieval.contracts.ranking_features import RANKER_FORMAT
from retrieval.embed import DIM


@pytest.fixture
def make_ranker():
    """f(folder, weights) -> a ranker folder as train_ranker writes one (the base model's adapter: W = 0)."""

    def write_ranker(folder, weights, general=None, train_queries=None, recall_threshold=None):
        """A ranker folder as train_ranker writes one (the base model's adapter: W = 0)."""
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "adapter.npy", np.zeros((DIM, DIM), dtype=np.float32))
        q = np.zeros((3, DIM), dtype=np.float32) if train_queries is None else train_queries
        np.save(folder / "queries.npy", q)
        cfg = {
            "input_format": RANKER_FORMAT,
            "weights": weights,
            "general_weights": general or weights,
            "domain_gate": {"k": 3, "lo": 0.0, "hi": 0.0},
            "bm25_sd_floor": 0.2,
        }
        if recall_threshold is not None:
            cfg["recall_threshold"] = recall_threshold
        (folder / "ranker_config.json").write_text(json.dumps(cfg))
        return folder

    return write_ranker
