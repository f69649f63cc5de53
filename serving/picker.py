"""Running the selector without ever failing the query: timeouts, crashes and garbage become the
first-stage order, counted; picks are cached by query so the next same query is served the pick.

The serving policy lives here (`Picker.serve`), not in the HTTP handler: a fast selector (`answers_inline`:
the ranker, a cascade's fast side) answers on the query path; a slow one (an LLM) answers
in the background and its pick serves the next same query, the first-stage order meanwhile. Whatever
chose it, the context never holds fewer than `min_chunks` candidates when there are that many: a short
pick is topped up from the first-stage order (`retrieval.contracts.selection.top_up`), counted `topped_up`.

Then the token budget cuts the served order into the context, and, for `explore_rate` of the queries,
the context's last slot is given to a candidate drawn uniformly from those below the cut (counted
`explored`): the consumer's citations then say something about chunks the policy would have hidden.
Every candidate's propensity (its probability of being shown under this policy) goes to the log.

After the context, the next `previews` candidates (the served order past the cut, then the first-stage order) are
listed as one-line previews the consumer may read whole (`expand`); each one's probability of being listed goes to
the log beside it (`retrieval.query.previews`).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field, replace

import numpy as np

from retrieval.contracts.interleaving import TrialParams, agreed_first, agreed_propensity, sides
from retrieval.contracts.selection import FIRST_STAGE, Pick, PromptCandidate, choose, first_stage_order, top_up
from retrieval.logs.feedback_records import normalize_query
from retrieval.query.previews import following, listed_propensity
from retrieval.query.search import Candidate, take_budget
from retrieval.query.shaping import fill

from .interface import Selector
from .ranker import RankerSelector
from .selectors import CascadeSelector


@dataclass(frozen=True)
class Served:
    """What `Picker.serve` decided for one query."""

    chosen: list[Candidate]  # the served order, best first (before the token budget), at least the floor
    version: str  # what chose them: a selector version, or "first-stage" (no selector)
    status: str  # the selection's status: ok / repaired / fallback / cached / pending (a slow pick to come)
    later: Selector | None  # the slow selector to run in the background for next time (None: nothing to run)
    active: str  # the version of the selector this query ran (inline) or queued (background)
    topped_up: int = 0  # candidates the floor added from the first-stage order
    context: list[Candidate] = field(default_factory=list)  # what the consumer is given: the budget's cut, explored
    propensity: dict[int, float] = field(default_factory=dict)  # rank -> P(shown) under the policy (0 if absent)
    explored: int | None = None  # the rank given the context's last slot by exploration, if any
    replaced: int | None = None  # the rank exploration took that slot from
    trial: int | None = None  # the trial this query was served in (interleaved), if any
    teams: dict[int, str] = field(default_factory=dict)  # rank -> whose top k held it, context and previews
    previews: list[Candidate] = field(default_factory=list)  # listed after the context as one-line previews
    preview_propensity: dict[int, float] = field(default_factory=dict)  # rank -> P(listed as a preview) (0 if absent)


@dataclass
class TrialArm:
    """A running trial as a service holds it: the challenger loaded (and canaried) beside the champion, and the share
    of queries it interleaves now (`TrialParams.share_at` of the evidence for the challenger so far)."""

    id: int
    selector: Selector
    rule: TrialParams
    evidence: InitVar[dict | None] = None  # the trial's evidence as `settle` stored it (None: none yet)
    share: float = field(init=False)  # of queries served interleaved now

    def __post_init__(self, evidence: dict | None) -> None:
        self.follow(evidence)

    def follow(self, evidence: dict | None) -> None:
        """Take the trial's evidence as `settle` stored it (None: none yet, the starting share)."""
        self.share = self.rule.share_at(evidence["evidence_for"] if evidence else 1.0)


def split(selector: Selector) -> tuple[Selector | None, Selector | None]:
    """(the selector that answers inline, the one that refines in the background) of a selector."""
    if isinstance(selector, CascadeSelector):
        return selector.fast, selector.slow
    return (selector, None) if selector.answers_inline else (None, selector)


class Picker:
    def __init__(
        self,
        selector: Selector,
        k: int = 5,
        timeout_s: float = 30.0,
        cache_size: int = 10_000,
        max_pending: int = 256,
        min_chunks: int = 3,
        token_budget: int = 1_000_000,
        explore_rate: float = 0.0,
        seed: int | None = None,
        conversation_tokens: int = 0,
        previews: int = 0,
    ):
        self.selector = selector  # swapped by reference (hot-swap); read once per selection
        self.k, self.timeout_s = k, timeout_s
        self.min_chunks = min_chunks  # the context's floor (search.min_chunks): a shorter pick is topped up
        self.token_budget = token_budget  # the context's token budget (search.token_budget)
        self.explore_rate = explore_rate  # share of queries whose last context slot goes to a candidate below the cut
        self.conversation_tokens = conversation_tokens  # a conversation's context filled to this many tokens (0 = off)
        self.previews = previews  # candidates listed after the context as one-line previews (search.previews)
        self._rng = random.Random(seed)
        self.trial: TrialArm | None = None  # set and cleared by the hot-swapper, read once per query
        self.max_pending = max_pending  # background selections waiting or running; more are skipped, counted
        self._pending = 0
        self.counts: Counter = Counter()  # ok / repaired / fallback / timeout / error / cached / topped_up / ...
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

    def serve(
        self, query: str, shown: list[Candidate], query_vec: np.ndarray | None = None, inline: bool = False
    ) -> Served:
        """The policy for one query over its `shown` candidates (first-stage order): a cached pick of the slow
        selector; else the fast selector's pick, inline (`inline` makes a slow one answer inline too); else
        the first-stage order while the slow one runs later. Then the floor. Never raises."""
        selector = self.selector  # read once: a hot-swap mid-request does not change it
        fast, slow = split(selector)
        pick = self.cached(query, shown, slow) if slow is not None else None
        status, later = ("cached", None) if pick else ("pending", slow)
        if pick is None and shown and (fast is not None or inline):
            pick = self.select(query, shown, fast or slow, query_vec)
            status = pick.status
            if fast is None:  # the slow selector answered inline: nothing left to refine
                later = None
        if pick is None:
            numbers, version = list(first_stage_order(len(shown), self.k)), FIRST_STAGE
        else:
            at = {c.chunk_id: i for i, c in enumerate(shown, start=1)}
            numbers, version = [at[i] for i in pick.ids], pick.version
        trial = self.trial  # read once, like the selector
        served = Served(chosen=[], version=version, status=status, later=later, active=selector.version)
        if trial is not None and shown and self._draw(trial.share):
            return self.interleave(query, shown, query_vec, numbers, trial, served)
        full = top_up(numbers, len(shown), self.min_chunks)
        if len(full) > len(numbers):
            self._count("topped_up")
        chosen = fill([shown[i - 1] for i in full], shown, self.conversation_tokens)
        planned = take_budget(chosen, self.token_budget, self.min_chunks)
        context, propensity, explored = self.expose(planned, shown)
        previews = following(context, chosen, shown, self.previews)
        return replace(
            served,
            chosen=chosen,
            previews=previews,
            preview_propensity=self.preview_propensity(planned, chosen, shown),
            later=later if shown else None,
            topped_up=len(full) - len(numbers),
            context=context,
            propensity=propensity,
            explored=explored,
            replaced=planned[-1].rank if explored is not None else None,
        )

    def interleave(
        self,
        query: str,
        shown: list[Candidate],
        query_vec: np.ndarray | None,
        champion: list[int],
        trial: TrialArm,
        served: Served,
    ) -> Served:
        """A trial query: the champion's ranking (`champion`, candidate numbers) and the challenger's, each
        completed by the first-stage order, served agreed-first (`retrieval.contracts.interleaving.agreed_first`): the
        chunks both would serve, then the draft of those only one would, as many chunks as the smaller of the two
        sides' own contexts (each cut by the token budget); each chunk in it and each preview one side alone would
        serve is logged with its side (`sides`): a cited preview earns its side credit as a cited context chunk does.
        No exploration: the coin of the draft already varies what is shown, and each item's propensity is its
        probability of being shown over the coins (`agreed_propensity`). The challenger runs inline (a slow one
        within the timeout) and its pick is not cached, so it never serves a query outside the trial."""
        fast, slow = split(trial.selector)
        pick = self.select(query, shown, fast or slow, query_vec, remember=False)
        at = {c.chunk_id: i for i, c in enumerate(shown, start=1)}
        n = len(shown)
        ours, theirs = top_up(champion, n, n), top_up([at[i] for i in pick.ids], n, n)
        k = min(
            len(take_budget([shown[i - 1] for i in side], self.token_budget, self.min_chunks))
            for side in (ours, theirs)
        )
        with self._lock:
            order, _ = agreed_first(ours, theirs, k, self._rng)
        chosen = [shown[i - 1] for i in order]
        context = chosen[:k]
        self._count("interleaved")
        previews = following(context, chosen, shown, self.previews)
        # whose own each item is, the previews' too: the draft's rest lists each side's own items it left out
        team = {
            shown[i - 1].rank: t
            for i, t in sides([*order[:k], *(at[c.chunk_id] for c in previews)], ours, theirs, k).items()
        }
        # each item's exposure over the draft's coins: what only one side would serve is shown about half the time,
        # and the trainer weighs its label for the times it was not
        top, deep = agreed_propensity(ours, theirs, k, k + len(previews))
        return replace(
            served,
            chosen=chosen,
            previews=previews,
            preview_propensity={
                c.rank: round(deep[at[c.chunk_id]] - top.get(at[c.chunk_id], 0.0), 6) for c in previews
            },
            version=f"trial:{trial.id}",
            context=context,
            propensity={c.rank: top[at[c.chunk_id]] for c in context},
            trial=trial.id,
            teams=team,
        )

    def _draw(self, share: float) -> bool:
        with self._lock:
            return self._rng.random() < share

    def expose(
        self, context: list[Candidate], shown: list[Candidate]
    ) -> tuple[list[Candidate], dict[int, float], int | None]:
        """(the context as given, rank -> propensity, the explored rank): with probability `explore_rate` the
        last slot goes to a candidate drawn uniformly from the shown ones below the cut. So the propensity is 1 for
        the slots above the last, 1 - rate for the last, rate / (how many are below it) for each below it."""
        in_context = {c.chunk_id for c in context}
        below = [c for c in shown if c.chunk_id not in in_context]
        rate = self.explore_rate if context and below else 0.0
        propensity = {c.rank: 1.0 for c in context}
        if rate == 0.0:
            return context, propensity, None
        propensity[context[-1].rank] = 1.0 - rate
        propensity.update({c.rank: rate / len(below) for c in below})
        with self._lock:
            pick = self._rng.choice(below) if self._rng.random() < rate else None
        if pick is None:
            return context, propensity, None
        self._count("explored")
        return [*context[:-1], pick], propensity, pick.rank

    def preview_propensity(
        self, planned: list[Candidate], chosen: list[Candidate], shown: list[Candidate]
    ) -> dict[int, float]:
        """rank -> P(listed as a preview) under `expose`'s draw (`retrieval.query.previews.listed_propensity`)."""
        rank = {c.chunk_id: c.rank for c in shown}
        p = listed_propensity(planned, chosen, shown, self.previews, self.explore_rate)
        return {rank[k]: v for k, v in p.items()}

    def select(
        self,
        query: str,
        candidates: list[Candidate],
        selector: Selector | None = None,
        query_vec: np.ndarray | None = None,
        remember: bool = True,
    ) -> Pick:
        """Run `selector` (default: the current one) on `candidates` (numbered 1..N in this order);
        never raises. `query_vec`: the query's embedding, when the caller computed it; `remember`: cache the
        pick for the next same query."""
        selector = selector or self.selector
        n = len(candidates)
        shown = [
            PromptCandidate(c.source, c.heading, c.text, c.parent_heading, c.vector, c.recalled) for c in candidates
        ]
        t0 = time.perf_counter()
        job = self._generate_pool.submit(selector.answer, query, shown, self.k, query_vec)
        selection, failure = choose(lambda: job.result(timeout=self.timeout_s), n, self.k, self.timeout_s)
        if failure:
            self._count(failure)
        self._count(selection.status)
        picked = [candidates[i - 1] for i in selection.selected]
        pick = Pick(
            ids=tuple(c.chunk_id for c in picked),
            status=selection.status,
            seconds=time.perf_counter() - t0,
            version=selector.version,
            ranks=tuple(c.rank for c in picked),
        )
        if remember and selection.status != "fallback":
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
        and counted (`skipped_backlog`): its query keeps the first-stage order, and the backlog (memory,
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

    def embedded(self) -> dict[str, int]:
        """Texts the active selector embedded itself (a ranker given candidates without stored vectors, or no
        query vector): on the service's query path both stay 0."""
        out: Counter = Counter()
        for s in {id(s): s for s in (self.selector, *split(self.selector))}.values():
            if isinstance(s, RankerSelector):
                out.update(s.embedded)
        return {"queries": out["queries"], "candidates": out["candidates"]}

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=False)
        self._generate_pool.shutdown(wait=False, cancel_futures=True)
