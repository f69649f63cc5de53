"""Waiting on what another thread or process does: poll until it holds, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    fn: Callable[[], T],
    timeout: float = 15.0,
    every: float = 0.05,
    ignore: tuple = (),
    why: Callable[[], str] | None = None,
) -> T:
    """The first truthy value `fn()` returns, polled every `every` seconds for up to `timeout`; an exception of a
    type in `ignore` counts as not yet (a server not listening yet), any other (an assertion that the process is
    still alive) ends the wait. AssertionError if it never holds, with `why()` (a process's log) in its message."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if value := fn():
                return value
        except ignore:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not reached in {timeout:g} s" + (f":\n{why()}" if why else ""))
        time.sleep(every)
