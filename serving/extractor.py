"""The LLM fact extractor of capture, on the selector's backends: Ollama when OLLAMA_HOST is reachable
and `capture.extractor_ollama` names a model, else llama.cpp in-process on `capture.extractor_gguf`;
neither configured: None, and the rule splitter decides (retrieval/conversation/capture_rules.py). The prompt and
the parser are the contract's (`extract_messages`, `parse_facts`), never a backend's."""

from __future__ import annotations

from pathlib import Path

from retrieval.conversation.capture import CaptureParams, Extractor

from .llm_selectors import LlamaCppSelector, OllamaSelector, ollama_reachable


class OllamaExtractor:
    def __init__(self, tag: str):
        self.selector = OllamaSelector(tag, f"ollama:{tag}", chunk_tokens=0)  # checks the host and the tag
        self.name = f"llm:{tag}"

    def complete(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        s = self.selector
        r = s.client.chat(
            model=s.tag,
            messages=messages,
            keep_alive=s.keep_alive,
            options={"temperature": 0, "num_ctx": s.n_ctx, "num_predict": max_tokens},
        )
        return r.message.content or ""


class LlamaCppExtractor:
    def __init__(self, gguf: Path):
        self.selector = LlamaCppSelector(gguf, f"gguf:{gguf.stem}", chunk_tokens=0)  # SelectorLoadError if it can't
        self.name = f"llm:{gguf.name}"

    def complete(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        s = self.selector
        ids = s.complete_tokens(s.prompt_tokens(messages), max_tokens)  # greedy, unconstrained, stops at EOS
        return s.llm.detokenize(ids).decode("utf-8", errors="replace")


def build_extractor(params: CaptureParams) -> Extractor | None:
    """The configured LLM extractor, or None (the rule splitter). A configured GGUF that does not load
    is a SelectorLoadError: the service refuses to start rather than silently judge by rules."""
    if params.extractor_ollama and ollama_reachable():
        return OllamaExtractor(params.extractor_ollama)
    if params.extractor_gguf:
        return LlamaCppExtractor(Path(params.extractor_gguf))
    return None
