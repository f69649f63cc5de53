"""Hot-swap (docs/architecture.md, "Hot-swap protocol"): the selector version the service must run lives in
Postgres; a change is announced with NOTIFY; the service loads and warms the new selector beside the
old one, runs a canary, then swaps one reference. In-flight requests finish on the selector they
started with; a failed canary keeps the old one and records why.

The deployment log it follows (what should run, what each service did) is `retrieval/logs/deployments.py`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import psycopg

from retrieval.contracts.selection import PromptCandidate, parse_selection
from retrieval.db import store_id
from retrieval.logs import trials
from retrieval.logs.deployments import APP_NAME, CHANNEL, Deployment, foreign_store, last_good, latest, record_apply

from .interface import Selector, SelectorLoadError
from .picker import Picker, TrialArm
from .selectors import resolve

log = logging.getLogger("pai.hotswap")

# Known prompts a new selector must answer (parsable, in time) before it serves anything.
CANARY: tuple[tuple[str, tuple[PromptCandidate, ...]], ...] = (
    (
        "does vitamin D prevent bone fractures in older adults?",
        (
            PromptCandidate(
                "trials/vitamin-d.md",
                "Results",
                "Daily vitamin D3 with calcium reduced hip fractures by 16% in women over 70.",
            ),
            PromptCandidate("notes/gardening.md", None, "Tomatoes need six hours of sun and regular watering."),
            PromptCandidate(
                "trials/vitamin-d.md", "Methods", "A randomised trial of 36,282 postmenopausal women over seven years."
            ),
            PromptCandidate("docs/postgres.md", "Indexes", "HNSW indexes trade recall for speed through ef_search."),
        ),
    ),
    (
        "how do I rotate the API token?",
        (
            PromptCandidate(
                "docs/security.md",
                "Tokens",
                "Rotate a token with `pai token rotate`; the old one stops working after 24 h.",
            ),
            PromptCandidate("docs/setup.md", "Install", "Run the installer, then start the service."),
            PromptCandidate("changelog.md", "0.3", "Token rotation no longer restarts the service."),
        ),
    ),
    (
        "what is the capital of France?",
        tuple(
            PromptCandidate(f"atlas/europe-{i}.md", None, text)
            for i, text in enumerate(
                (
                    "Paris is the capital and largest city of France.",
                    "Berlin is the capital of Germany.",
                    "France borders Spain, Italy, Germany, Belgium and Switzerland.",
                    "Madrid is the capital of Spain.",
                    "The Seine flows through Paris.",
                    "Lyon is known for its cuisine.",
                ),
                1,
            )
        ),
    ),
)


def canary(selector: Selector, timeout_s: float, k: int = 5) -> tuple[bool, str]:
    """Every known prompt must be answered within `timeout_s` with output the contract parses
    (repaired is fine, fallback is not)."""
    times = []
    with ThreadPoolExecutor(1, thread_name_prefix="canary") as pool:
        for query, cands in CANARY:
            t0 = time.perf_counter()
            try:
                raw = pool.submit(selector.answer, query, list(cands), k).result(timeout=timeout_s)
            except FutureTimeout:
                return False, f"canary: no answer within {timeout_s:g} s to {query!r}"
            except Exception as e:  # noqa: BLE001 - any failure of a new selector fails its canary
                return False, f"canary: {type(e).__name__}: {e}"[:300]
            sel = parse_selection(raw, len(cands), k)
            if sel.status == "fallback":
                return False, f"canary: unusable answer to {query!r}: {sel.problem} ({raw[:80]!r})"
            times.append(time.perf_counter() - t0)
    return True, f"canary {len(CANARY)}/{len(CANARY)} ok, max {max(times) * 1000:.0f} ms"


class HotSwapper:
    """Follows `selector_deployments` for one service: LISTENs on its own connection, applies the
    newest announced version (load + warm + canary beside the old one, then one reference swap)."""

    def __init__(
        self,
        picker: Picker,
        db_url: str,
        canary_timeout_s: float = 60.0,
        grace_s: float | None = None,
        build: Callable[[dict], Selector] = resolve,
    ):
        self.picker, self.db_url, self.build = picker, db_url, build
        self.canary_timeout_s = canary_timeout_s
        self.grace_s = picker.timeout_s if grace_s is None else grace_s  # old selector closed after in-flight work
        self.name = f"{socket.gethostname()}:{os.getpid()}:{id(self) % 10_000}"
        self.deployment_id: int | None = None
        self.since: float = time.time()
        self.last_error: str | None = None
        self._rejected: set[int] = set()
        self._rejected_trials: set[int] = set()  # trials whose challenger did not load or failed its canary here
        self.store: str | None = None  # this service's store, read once from its database
        self._force = False  # reload: apply the latest even if already seen
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.caught_up = threading.Event()  # set once the start-up catch-up is done: the service is ready
        self._thread = threading.Thread(target=self._run, name="hotswap", daemon=True)

    def start(self, wait_s: float = 30.0) -> HotSwapper:
        """Start listening; returns once LISTEN is in place (announcements from now on are seen)."""
        self._thread.start()
        self._ready.wait(wait_s)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def reload(self, conn: psycopg.Connection) -> None:
        """Forget rejections and re-read the latest deployment (through the listener thread)."""
        self._rejected.clear()
        self._force = True
        conn.execute("SELECT pg_notify(%s, 'reload')", (CHANNEL,))

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the selector the deployments name (or the last good one) is loaded, warmed and serving."""
        return self.caught_up.wait(timeout_s)

    def status(self) -> dict:
        return {
            "ready": self.caught_up.is_set(),
            "version": self.picker.selector.version,
            "deployment_id": self.deployment_id,
            "since": self.since,
            "last_error": self.last_error,
            "service": self.name,
            "trial": self.picker.trial.id if self.picker.trial else None,
        }

    def _run(self) -> None:
        backoff, failures = 0.5, 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.db_url, autocommit=True, application_name=f"{APP_NAME}:{self.name}") as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    self._catch_up(conn, startup=self.deployment_id is None)
                    self.caught_up.set()
                    backoff = 0.5
                    while not self._stop.is_set():
                        if any(True for _ in conn.notifies(timeout=0.5, stop_after=1)):
                            self._catch_up(conn, startup=False)
            except psycopg.Error as e:  # the database went away: keep serving, reconnect with backoff
                failures += 1
                if failures >= 3:  # no deployments to follow (LISTEN refused, e.g. a pooler): ready on what it has
                    self.caught_up.set()
                self.last_error = (
                    f"listener: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                )
                log.warning("%s; retrying in %.1f s", self.last_error, backoff)
                self._ready.set()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _catch_up(self, conn: psycopg.Connection, startup: bool) -> None:
        """Apply the newest deployment (announcements that arrived meanwhile are coalesced), then follow the trial."""
        self._follow_deployment(conn, startup)
        self._follow_trial(conn)

    def _follow_trial(self, conn: psycopg.Connection) -> None:
        """Serve the running trial's challenger beside the champion (loaded and canaried first), or none."""
        trial, arm = trials.running(conn), self.picker.trial
        if trial is not None and arm is not None and arm.id == trial.id:
            arm.follow(trial.evidence)  # the evidence another service settled: the share follows it here too
            return
        if arm is not None:  # the trial ended (or another replaced it): the champion serves alone again
            self.picker.trial = None
            _close_later(arm.selector, self.grace_s)
            log.info("trial %d ended here", arm.id)
        if trial is None or trial.id in self._rejected_trials:
            return
        if why := foreign_store(trial.challenger_record, self._store(conn)):
            self._rejected_trials.add(trial.id)
            self.last_error = f"trial {trial.id} ({trial.challenger}) not served here: {why}"
            log.warning("%s", self.last_error)
            return
        try:
            challenger = self.build(trial.challenger_record)
        except Exception as e:  # noqa: BLE001 - a challenger that does not load stays out; the champion serves
            self._rejected_trials.add(trial.id)
            self.last_error = f"trial {trial.id} ({trial.challenger}) not served here: load: {type(e).__name__}: {e}"
            log.warning("%s", self.last_error)
            return
        ok, detail = canary(challenger, self.canary_timeout_s, self.picker.k)
        if not ok:
            _close_later(challenger, 0)
            self._rejected_trials.add(trial.id)
            self.last_error = f"trial {trial.id} ({trial.challenger}) not served here: {detail}"
            log.warning("%s", self.last_error)
            return
        arm = self.picker.trial = TrialArm(trial.id, challenger, trial.rule, trial.evidence)
        log.info(
            "trial %d: %s vs %s on %.0f%% of queries (up to %.0f%% as the evidence for it grows)",
            trial.id,
            trial.challenger,
            trial.champion,
            100 * arm.share,
            100 * trial.rule.max_share,
        )

    def _follow_deployment(self, conn: psycopg.Connection, startup: bool) -> None:
        dep = latest(conn)
        if dep is None or (not self._force and (dep.id == self.deployment_id or dep.id in self._rejected)):
            return
        self._force = False
        ok = self.apply(conn, dep)
        while startup and not ok:  # at start-up a bad newest version must not leave us on nothing
            dep = last_good(conn, dep.id)
            if dep is None:
                return
            ok = self.apply(conn, dep)

    def _store(self, conn: psycopg.Connection) -> str:
        """This service's store (its database's identity): a model trained for another is never loaded."""
        if self.store is None:
            self.store = store_id(conn)
        return self.store

    def apply(self, conn: psycopg.Connection, dep: Deployment) -> bool:
        old = self.picker.selector
        if why := foreign_store(dep.record, self._store(conn)):  # before the version: each registry counts from 1
            return self._reject(conn, dep, why)
        if dep.version == old.version:
            self.deployment_id = dep.id
            record_apply(conn, dep.id, self.name, True, "already serving this version")
            return True
        t0 = time.perf_counter()
        try:
            new = self.build(dep.record)
        except (SelectorLoadError, OSError, ValueError) as e:
            return self._reject(conn, dep, f"load: {e}")
        except Exception as e:  # noqa: BLE001 - a record no loader foresaw is rejected too: the listener must live on
            return self._reject(conn, dep, f"load: {type(e).__name__}: {e}")
        ok, detail = canary(new, self.canary_timeout_s, self.picker.k)
        if not ok:
            _close_later(new, 0)
            return self._reject(conn, dep, detail)
        self.picker.selector = new  # the swap: one reference; requests read it once when they start
        self.deployment_id, self.since, self.last_error = dep.id, time.time(), None
        ms = record_apply(conn, dep.id, self.name, True, f"{detail}; loaded in {time.perf_counter() - t0:.2f} s")
        log.info("selector %s -> %s (deployment %d, %.0f ms after announce)", old.version, new.version, dep.id, ms)
        _close_later(old, self.grace_s)
        return True

    def _reject(self, conn: psycopg.Connection, dep: Deployment, why: str) -> bool:
        self.last_error = f"deployment {dep.id} ({dep.version}) rejected: {why}"
        log.warning("%s; still serving %s", self.last_error, self.picker.selector.version)
        record_apply(conn, dep.id, self.name, False, why)
        self._rejected.add(dep.id)  # not retried on later announcements; a new deployment is
        return False


def _close_later(selector: Selector, delay_s: float) -> None:
    close = getattr(selector, "close", None)
    if close is None:
        return
    timer = threading.Timer(delay_s, close)
    timer.daemon = True
    timer.start()
