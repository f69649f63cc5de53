"""Selector backends behind one interface: given the contract's chat messages, return raw text.

Parsing, repair and fallback are the contract's (`retrieval.selection.parse_selection`), never a
backend's, so every backend is judged by the same rules. Model backends (Ollama, llama.cpp,
transformers) implement the same two members.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from retrieval.selection import render_answer, similarity_order


class Selector(Protocol):
    version: str  # what the feedback log records as having served a query

    def generate(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        """The selector's raw answer for `n` candidates, at most `k` picks."""
        ...


class SimilaritySelector:
    """The baseline: keep retrieval order."""

    version = "similarity"

    def generate(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        return render_answer(list(similarity_order(n, k)))


class TransformersSelector:
    """A trained selector run by transformers: base model + LoRA adapter (merged), greedy decoding.
    Used by evaluation and as a serving fallback; it renders the prompt with the chunk budget it was
    trained with (`chunk_tokens`)."""

    def __init__(self, model_dir: Path, max_new_tokens: int = 48):
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = json.loads((model_dir / "train_config.json").read_text())
        self.version = f"transformers:{cfg.get('mlflow_run_id') or model_dir.name}"
        self.chunk_tokens = int(cfg.get("chunk_tokens", 200))
        base = model_dir / "base" if (model_dir / "base" / "config.json").exists() else cfg["base_model"]
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir / "adapter")
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        self.model = PeftModel.from_pretrained(model, model_dir / "adapter").merge_and_unload().eval()
        self.max_new_tokens = max_new_tokens

    def generate(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        import torch

        enc = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id)  # fmt: skip
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def build_selector(name: str) -> Selector:
    """`similarity`, or a trained model folder (train stage output) run by transformers."""
    if name == "similarity":
        return SimilaritySelector()
    if Path(name).is_dir() and (Path(name) / "train_config.json").exists():
        return TransformersSelector(Path(name))
    raise ValueError(f"unknown selector {name!r} (similarity, or a trained model folder such as models/selector)")
