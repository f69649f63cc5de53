"""Selector backends behind one interface: given the contract's chat messages, return raw text.

Parsing, repair and fallback are the contract's (`retrieval.selection.parse_selection`), never a
backend's, so every backend is judged by the same rules. Model backends (Ollama, llama.cpp,
transformers) implement the same two members.
"""

from __future__ import annotations

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


def build_selector(name: str) -> Selector:
    if name == "similarity":
        return SimilaritySelector()
    raise ValueError(f"unknown selector {name!r} (available: similarity)")
