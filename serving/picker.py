"""Running the selector without ever failing the query: timeouts, crashes and garbage become the
similarity order, counted; picks are cached by query so the next same query is served the pick."""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from retrieval.feedback import normalize_query
from retrieval.search import Candidate
from retrieval.selection import Pick, PromptCandidate, Selection, parse_selection, similarity_order

from .interface import Selector


class Picker:
    def __init__(
        self,
        selector: Selector,
        k: int = 5,
        timeout_s: float = 30.0,
        cache_size: int = 10_000,
        max_pending: int = 256,
    ):
        self.selector = selector  # swapped by reference (hot-swap); read once per selection
        self.k, self.timeout_s = k, timeout_s
        self.max_pending = max_pending  # background selections waiting or running; more are skipped, counted
        self._pending = 0
        self.counts: Counter = Counter()  # ok / repaired / fallback / timeout / error / cached
        self._cache: OrderedDict[str, Pick] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._generate_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="selector")
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="select-bg")

    def cached(self, query: str, candidates: list[Candidate], selector: Selector | None = None) -> Pick | None:
        """The cached pick for this query, if the current selector made it and all its chunks are
        still among the candidates (after a hot-swap, the old selector's picks are not served)."""
        with self._lock:
            pick = self._cache.get(normalize_query(query))
        if (
            pick
            and pick.version == (selector or self.selector).version
            and set(pick.ids) <= {c.chunk_id for c in candidates}
        ):
            self._count("cached")
            return pick
        return None

    def select(self, query: str, candidates: list[Candidate], selector: Selector | None = None) -> Pick:
        """Run `selector` (default: the current one) on `candidates` (numbered 1..N in this order);
        never raises."""
        selector = selector or self.selector
        n = len(candidates)
        shown = [PromptCandidate(c.source, c.heading, c.text) for c in candidates]
        t0 = time.perf_counter()
        try:
            raw = self._generate_pool.submit(selector.answer, query, shown, self.k).result(timeout=self.timeout_s)
            selection = parse_selection(raw, n, self.k)
        except FutureTimeout:
            selection = Selection(
                similarity_order(n, self.k), "fallback", f"selector timed out after {self.timeout_s:g} s"
            )
            self._count("timeout")
        except Exception as e:  # noqa: BLE001 - any backend failure must fall back, and is counted
            selection = Selection(
                similarity_order(n, self.k), "fallback", f"selector failed: {type(e).__name__}: {e}"[:200]
            )
            self._count("error")
        self._count(selection.status)
        picked = [candidates[i - 1] for i in selection.selected]
        pick = Pick(
            tuple(c.chunk_id for c in picked),
            selection.status,
            time.perf_counter() - t0,
            selector.version,
            tuple(c.rank for c in picked),
        )
        if selection.status != "fallback":
            with self._lock:
                self._cache[normalize_query(query)] = pick
                self._cache.move_to_end(normalize_query(query))
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return pick

    def select_later(
        self, query: str, candidates: list[Candidate], done: Callable[[Pick], None], selector: Selector | None = None
    ) -> None:
        """Select in the background; `done` gets the pick (its errors are counted, not raised). While
        `max_pending` selections wait or run (a slow selector under a flood of queries), a new one is skipped
        and counted (`skipped_backlog`): its query keeps the similarity order, and the backlog (memory,
        staleness, shutdown time) stays bounded."""
        selector = selector or self.selector
        with self._lock:
            if self._pending >= self.max_pending:
                self.counts["skipped_backlog"] += 1
                return
            self._pending += 1

        def work() -> None:
            try:
                pick = self.select(query, candidates, selector)
                try:
                    done(pick)
                except Exception:  # noqa: BLE001
                    self._count("log_error")
            finally:
                with self._lock:
                    self._pending -= 1

        self._background.submit(work)

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=False)
        self._generate_pool.shutdown(wait=False, cancel_futures=True)
