"""What every selector backend is to the rest of the service: the `Selector` interface, and the one
error a backend that cannot be built raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from retrieval.selection import PromptCandidate


class Selector(Protocol):
    version: str  # what the feedback log records as having served a query

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int) -> str:
        """The selector's raw answer for the candidates (numbered 1..N in this order), at most `k` picks."""
        ...


class SelectorLoadError(RuntimeError):
    """A selector that cannot be built (missing or corrupt GGUF, unreachable backend, bad record)."""
