"""The cross-encoder selector (stage `train_ce`'s model): scores every (query, passage) pair inline
and answers the contract's `{"selected": [...]}` with the k best candidates, best first.

No generation, so no parsing can fail: the answer is always well-formed, and ties keep retrieval
order. One forward pass at a time (a lock): on a few cores, concurrent passes only fight over the
same threads, and the fast tokenizer must not be shared by two calls at once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from retrieval.contracts.ce_input import CE_INPUT_FORMAT, ce_clip, ce_passage
from retrieval.contracts.cpu_dtype import ce_dtype
from retrieval.contracts.learned_fusion import fuse_for
from retrieval.contracts.selection import PromptCandidate, render_answer

from .interface import SelectorLoadError


class CrossEncoderSelector:
    """A `train_ce` output folder (model/, ce_config.json) served as a selector."""

    answers_inline = True  # tens of ms for 20 pairs: the fast side of a cascade

    def __init__(
        self,
        model_dir: Path,
        version: str,
        max_length: int | None = None,
        threads: int | None = None,
        batch_size: int = 32,
        dtype: str | None = None,
    ):
        """`max_length` None = the length the model was trained with; `threads` sets torch's (process-wide)
        intra-op threads, None leaves torch's default (one per core); `dtype` None = the folder's
        `serve_dtype` (`retrieval.contracts.cpu_dtype.ce_dtype`; float32 for folders that predate it)."""
        import torch
        from sentence_transformers import CrossEncoder

        model_dir = Path(model_dir)
        try:
            cfg = json.loads((model_dir / "ce_config.json").read_text())
        except (OSError, ValueError) as e:  # no config = no finished training run in this folder
            raise SelectorLoadError(f"not a trained cross-encoder folder: {model_dir}: {e}") from e
        if cfg.get("input_format") != CE_INPUT_FORMAT:
            raise SelectorLoadError(
                f"{model_dir}: input format {cfg.get('input_format')!r}, this service renders {CE_INPUT_FORMAT!r}"
            )
        if threads:
            torch.set_num_threads(threads)
        self.max_length = max_length or int(cfg["max_length"])
        try:
            self.dtype = ce_dtype(dtype or cfg.get("serve_dtype", "float32"))
        except ValueError as e:
            raise SelectorLoadError(f"{model_dir}: {e}") from e
        self.model = CrossEncoder(str(model_dir / "model"), max_length=self.max_length, device="cpu")
        self.model.to(getattr(torch, self.dtype))
        self.version, self.batch_size = version, batch_size
        self.fusion = cfg.get("fusion")  # the retrieval-order prior fitted with the model (None: the model alone)
        self._lock = threading.Lock()

    def scores(self, query: str, candidates: Sequence[PromptCandidate]) -> list[float]:
        """The model's logit for each candidate, in candidate order."""
        return self.score_texts(query, [ce_passage(c.heading, c.text, c.parent_heading) for c in candidates])

    def score_texts(self, query: str, texts: list[str]) -> list[float]:
        """The model's logit for each rendered passage (`ce_passage`), in order. Passages are clipped to
        `max_length` words first (`ce_clip`): the same word pieces reach the model, tokenized faster."""
        if not texts:
            return []
        pairs = [(query, ce_clip(t, self.max_length)) for t in texts]
        with self._lock:
            s = self.model.predict(pairs, batch_size=self.batch_size, activation_fn=None, show_progress_bar=False)
        return [float(x) for x in s]

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int, query_vec=None) -> str:
        texts = [ce_passage(c.heading, c.text, c.parent_heading) for c in candidates]
        s = fuse_for(query, texts, self.score_texts(query, texts), self.fusion)
        best = sorted(range(len(s)), key=lambda i: (-s[i], i))[: max(k, 0)]  # ties: retrieval order
        return render_answer([i + 1 for i in best])

    def close(self) -> None:
        pass
