"""What every selector backend is to the rest of the service: the `Selector` interface, and the one
error a backend that cannot be built raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from retrieval.contracts.selection import PromptCandidate


class Selector(Protocol):
    version: str  # what the feedback log records as having served a query
    answers_inline: bool  # fast enough to answer on the query path; else it refines in the background

    def answer(
        self, query: str, candidates: Sequence[PromptCandidate], k: int, query_vec: np.ndarray | None = None
    ) -> str:
        """The selector's raw answer for the candidates (numbered 1..N in this order), at most `k` picks.
        `query_vec`: the query's embedding when the caller has it (the service's search computed it)."""
        ...


class SelectorLoadError(RuntimeError):
    """A selector that cannot be built (missing or corrupt GGUF, unreachable backend, bad record)."""
