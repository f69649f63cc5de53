"""Progress a person can follow, on a terminal and in a log.

On a terminal, rich's live bar. Piped (`pai lab cycle > cycle.log 2>&1`, cron, CI), a live bar shows nothing
until it ends; there, a reporter thread prints a plain line per running task every `every_s` seconds (count,
total, rate, elapsed) and one as each task finishes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import Progress


def make_progress(*columns, console: Console, every_s: float = 30.0, transient: bool = False) -> Progress:
    if console.is_terminal:
        return Progress(*columns, console=console, transient=transient)
    return LogProgress(*columns, console=console, every_s=every_s)


class LogProgress(Progress):
    """Progress for a log: no live display; a reporter thread prints plain lines instead. Intervals, elapsed times
    and rates are read off `clock` (a test passes its own)."""

    def __init__(self, *columns, console: Console, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        super().__init__(*columns, console=console, disable=True, get_time=clock)
        self.every_s = every_s
        self._halt = threading.Event()
        self._printed: dict[int, float] = {}  # task id -> when its last line was printed
        self._finished: set[int] = set()
        self._reporter = threading.Thread(target=self._report_loop, name="progress-log", daemon=True)

    def start(self) -> None:
        super().start()
        if not self._reporter.is_alive():
            self._reporter.start()

    def stop(self) -> None:
        self._halt.set()
        if self._reporter.is_alive():
            self._reporter.join(timeout=5)
        self._report(self.get_time(), final=True)
        super().stop()

    def _report_loop(self) -> None:
        while not self._halt.wait(min(1.0, self.every_s)):
            self._report(self.get_time())

    def _report(self, now: float, final: bool = False) -> None:
        with self._lock:
            tasks = list(self._tasks.values())
        for t in tasks:
            if t.id in self._finished or t.start_time is None:
                continue
            if t.finished:
                self._finished.add(t.id)
                self.console.print(
                    f"{log_line(t.description, t.completed, t.total, t.elapsed or 0.0)} done", soft_wrap=True
                )
            elif final or now - self._printed.setdefault(t.id, t.start_time) >= self.every_s:
                self._printed[t.id] = now
                self.console.print(log_line(t.description, t.completed, t.total, t.elapsed or 0.0), soft_wrap=True)


def log_line(description: str, completed: float, total: float | None, elapsed: float) -> str:
    """ "1. ingest SciFact corpus: 1,280/5,183 (25 %), 42.6/s, 0:00:30" """
    rate = completed / elapsed if elapsed > 0 else 0.0
    of = f"/{total:,.0f} ({100 * completed / total:.0f} %)" if total else ""
    m, sec = divmod(int(elapsed), 60)
    return f"{description}: {completed:,.0f}{of}, {rate:,.1f}/s, {m // 60}:{m % 60:02d}:{sec:02d}"
