"""The LLM selector backends: each renders the contract's prompt (`retrieval.contracts.selection`) with the
per-chunk budget the model was trained with, returns raw text, and decodes constrained to the output schema
where the backend allows it: `ollama` (chat with `format` = the JSON schema, `temperature 0`, `keep_alive`
so the model stays loaded); `llamacpp` (the same GGUF in-process, greedy, each token constrained to keep the
output a prefix of a canonical answer, `retrieval.contracts.selection.answer_state`); `transformers` (base +
LoRA adapter merged, greedy: evaluation and the export parity check). `serving.selectors.resolve` picks one.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np

from retrieval.contracts.selection import PromptCandidate, answer_state, output_schema, render_messages

from .interface import SelectorLoadError

# Ollama's Go template for the Qwen2.5 chat format the selector is trained with (trl's qwen2_5.jinja,
# a system + user turn, then the assistant turn): export writes it into the Modelfile, deploy creates the tag with it.
OLLAMA_TEMPLATE = (
    "<|im_start|>system\n{{ .System }}<|im_end|>\n<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n"
)


class ChatSelector:
    """An LLM selector: renders the contract's messages, then `chat`s them."""

    version: str = "llm"
    chunk_tokens: int = 200
    answers_inline = False  # ~1 s a query or more: it refines in the background, its pick serves the next same query

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int, query_vec=None) -> str:
        return self.chat(render_messages(query, list(candidates), k, self.chunk_tokens), len(candidates), k)

    def chat(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        raise NotImplementedError

    def close(self) -> None:
        pass


class TransformersSelector(ChatSelector):
    """A trained selector run by transformers: base model + LoRA adapter (merged), greedy decoding."""

    def __init__(self, model_dir: Path, max_new_tokens: int = 48):
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = json.loads((model_dir / "train_config.json").read_text())
        self.version = f"transformers:{cfg.get('mlflow_run_id') or model_dir.name}"
        self.chunk_tokens = int(cfg.get("chunk_tokens", 200))
        local = model_dir / "base" if (model_dir / "base" / "config.json").exists() else None
        base = local or cfg.get("base_path") or cfg["base_model"]  # the CPU profile's real base: the model cache's
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir / "adapter")
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        self.model = PeftModel.from_pretrained(model, model_dir / "adapter").merge_and_unload().eval()
        self.max_new_tokens = max_new_tokens

    def chat(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        import torch

        enc = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.inference_mode():
            out = self.model.generate(
                **enc, max_new_tokens=self.max_new_tokens, do_sample=False, pad_token_id=self.tokenizer.pad_token_id
            )
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


_ANSWER_TOKENS: dict[tuple, list[tuple[int, str]]] = {}


class LlamaCppSelector(ChatSelector):
    """The exported GGUF in-process: the chat template stored in the GGUF, greedy decoding where each
    step takes the model's best token among those that keep the text a prefix of a canonical answer
    (`answer_state`). llama.cpp's GBNF grammar does the same, but checks all 151,936 tokens per step
    (~0.8 s/token here); only ~700 tokens can ever appear in an answer, so they are checked instead."""

    ANSWER_CHARS = frozenset('{}[]",: selectd0123456789')

    def __init__(
        self,
        gguf: Path,
        version: str,
        chunk_tokens: int,
        n_ctx: int = 4096,
        max_new_tokens: int = 48,
        threads: int | None = None,
    ):
        if not Path(gguf).is_file():
            raise SelectorLoadError(f"GGUF not found: {gguf}")
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as e:  # pragma: no cover - a dependency of the package
            raise SelectorLoadError("llama-cpp-python is not installed") from e
        try:
            self.llm = Llama(
                model_path=str(gguf), n_ctx=n_ctx, n_threads=threads or min(4, os.cpu_count() or 1), verbose=False
            )
        except (ValueError, RuntimeError) as e:
            raise SelectorLoadError(f"GGUF does not load: {gguf}: {e}") from e
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise SelectorLoadError(f"GGUF has no chat template: {gguf}")
        special = lambda t: self.llm.detokenize([t], special=True).decode()  # noqa: E731
        self.formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=special(self.llm.token_eos()),
            bos_token=special(self.llm.token_bos()),
            add_generation_prompt=True,
        )
        self.answer_tokens = self._answer_tokens()
        self.version, self.chunk_tokens, self.max_new_tokens = version, chunk_tokens, max_new_tokens
        self._lock = threading.Lock()  # one llama context: one generation at a time

    def _answer_tokens(self) -> list[tuple[int, str]]:
        """The vocabulary's tokens made only of answer characters (~700 of Qwen2's 151,936); a scan
        takes ~1 s, so it is done once per vocabulary (every version of a selector shares one)."""
        n = self.llm.n_vocab()
        key = (n, *(self.llm.detokenize([t]) for t in (0, n // 2, n - 1)))
        if key not in _ANSWER_TOKENS:
            _ANSWER_TOKENS[key] = self._scan_vocab()
        return _ANSWER_TOKENS[key]

    def _scan_vocab(self) -> list[tuple[int, str]]:
        out = []
        for t in range(self.llm.n_vocab()):
            try:
                text = self.llm.detokenize([t]).decode()
            except UnicodeDecodeError:
                continue
            if text and set(text) <= self.ANSWER_CHARS:
                out.append((t, text))
        return out

    def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        prompt = self.formatter(messages=messages).prompt
        return self.llm.tokenize(prompt.encode(), add_bos=False, special=True)

    def chat(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        import llama_cpp

        ids = self.prompt_tokens(messages)
        text = ""
        with self._lock:
            self.llm.reset()
            self.llm.eval(ids)
            for _ in range(self.max_new_tokens):
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(self.llm.ctx), shape=(self.llm.n_vocab(),))
                allowed = [(t, s) for t, s in self.answer_tokens if answer_state(text + s, n, k)]
                if not allowed:
                    break
                t, s = max(allowed, key=lambda ts: logits[ts[0]])
                text += s
                if answer_state(text, n, k) == "done":
                    break
                self.llm.eval([t])
        return text

    def forced_argmax(self, prompt_ids: list[int], answer_ids: list[int]) -> list[int]:
        """The model's top token at each answer position, teacher-forced (the export parity check)."""
        import llama_cpp

        out = []
        with self._lock:
            self.llm.reset()
            for step in [prompt_ids, *([t] for t in answer_ids[:-1])]:
                self.llm.eval(step)
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(self.llm.ctx), shape=(self.llm.n_vocab(),))
                out.append(int(np.argmax(logits)))
        return out

    def complete_tokens(self, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        """Unconstrained greedy continuation of exact token ids (the export parity check)."""
        with self._lock:
            self.llm.reset()
            out: list[int] = []
            for tok in self.llm.generate(prompt_ids, temp=0.0, top_k=1, reset=True):
                if tok == self.llm.token_eos() or len(out) >= max_new_tokens:
                    break
                out.append(tok)
        return out

    def close(self) -> None:
        with self._lock:
            self.llm.close()


class OllamaSelector(ChatSelector):
    """A model served by Ollama (`ollama create pai-selector:<version>` at deploy)."""

    def __init__(
        self,
        tag: str,
        version: str,
        chunk_tokens: int,
        host: str | None = None,
        n_ctx: int = 4096,
        keep_alive: str = "30m",
        timeout_s: float = 60.0,
    ):
        import ollama

        self.client = ollama.Client(host=host or os.environ.get("OLLAMA_HOST"), timeout=timeout_s)
        self.tag, self.version, self.chunk_tokens, self.n_ctx, self.keep_alive = (
            tag,
            version,
            chunk_tokens,
            n_ctx,
            keep_alive,
        )
        try:
            names = {m.model for m in self.client.list().models}
        except Exception as e:  # noqa: BLE001 - connection refused, timeouts, HTTP errors
            raise SelectorLoadError(f"Ollama unreachable at {host or os.environ.get('OLLAMA_HOST')}: {e}") from e
        if tag not in names and f"{tag}:latest" not in names:
            raise SelectorLoadError(f"Ollama has no model {tag!r}")

    def chat(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        r = self.client.chat(
            model=self.tag,
            messages=messages,
            format=output_schema(n, k),
            keep_alive=self.keep_alive,
            options={"temperature": 0, "num_ctx": self.n_ctx},
        )
        return r.message.content or ""


def ollama_reachable(host: str | None = None) -> bool:
    host = host or os.environ.get("OLLAMA_HOST")
    if not host:
        return False
    url = host if host.startswith("http") else f"http://{host}"
    try:
        return httpx.get(f"{url}/api/version", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False
