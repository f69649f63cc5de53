"""Piped to a log, progress is plain lines: one per running task every `every_s`, one as each task ends."""

import io

from rich.console import Console
from rich.progress import Progress

from retrieval.progress import LogProgress, log_line, make_progress
from tests.waiting import wait_for


class Clock:
    """The bar's clock, moved by the test: intervals and rates without waiting for them."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_line_per_task_at_the_interval_and_at_the_end():
    out = io.StringIO()
    console = Console(file=out, width=240, force_terminal=False)
    assert isinstance(make_progress(console=console), LogProgress)
    clock = Clock()
    bar = LogProgress(console=console, every_s=30, clock=clock)
    with bar:
        task = bar.add_task("1. ingest corpus", total=100)
        other = bar.add_task("2. replay", total=None)
        bar.advance(task, 50)
        bar.advance(other, 30)
        clock.now += 29.9
        assert out.getvalue() == ""  # not yet: within the interval
        clock.now += 0.1  # the interval has passed: the reporter's next look prints a line per running task
        wait_for(lambda: "2. replay: 30, 1.0/s, 0:00:30" in out.getvalue(), 5)
        clock.now += 10
        bar.update(task, completed=100)
        wait_for(lambda: "done" in out.getvalue(), 5)  # a finish is noticed at the next look, not only at stop
    assert out.getvalue().splitlines() == [
        "1. ingest corpus: 50/100 (50 %), 1.7/s, 0:00:30",
        "2. replay: 30, 1.0/s, 0:00:30",
        "1. ingest corpus: 100/100 (100 %), 2.5/s, 0:00:40 done",  # a finished task is reported once
        "2. replay: 30, 0.8/s, 0:00:40",  # at stop, every task still running
    ]
    assert "\r" not in out.getvalue() and "━" not in out.getvalue()  # no bar drawn into the log


def test_a_terminal_keeps_the_live_bar():
    console = Console(file=io.StringIO(), force_terminal=True)
    bar = make_progress(console=console)
    assert type(bar) is Progress


def test_log_line():
    assert log_line("x", 1280, 5183, 30.0) == "x: 1,280/5,183 (25 %), 42.7/s, 0:00:30"
    assert log_line("y", 7, None, 3725.0) == "y: 7, 0.0/s, 1:02:05"
