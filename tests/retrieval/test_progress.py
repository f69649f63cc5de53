"""Piped to a log, progress is plain lines: one per running task every `every_s`, one as each task ends."""

import io
import re
import time

from rich.console import Console
from rich.progress import Progress

from retrieval.progress import LogProgress, log_line, make_progress


def test_a_log_gets_a_line_per_task_at_the_interval_and_at_the_end():
    out = io.StringIO()
    console = Console(file=out, width=240, force_terminal=False)
    bar = make_progress(console=console, every_s=0.3)
    assert isinstance(bar, LogProgress)
    with bar:
        task = bar.add_task("1. ingest corpus", total=100)
        other = bar.add_task("2. replay", total=None)
        for _ in range(10):
            bar.advance(task, 5)
            bar.advance(other, 3)
            time.sleep(0.1)
        bar.update(task, completed=100)
        time.sleep(1.2)  # the reporter notices the finish within a second
        lines_before_stop = out.getvalue().splitlines()
    lines = out.getvalue().splitlines()
    ingest = [line for line in lines if line.startswith("1. ingest corpus:")]
    assert len(ingest) >= 2 and ingest[-1].endswith("done") and "100/100 (100 %)" in ingest[-1]
    assert sum(line.endswith("done") for line in ingest) == 1  # a finished task is reported once
    assert any("1. ingest corpus: 100/100" in line for line in lines_before_stop)  # not only at stop
    replay = [line for line in lines if line.startswith("2. replay:")]
    assert replay and re.search(r"2\. replay: \d+, [\d.]+/s, 0:00:0\d$", replay[-1])
    assert "\r" not in out.getvalue() and "━" not in out.getvalue()  # no bar drawn into the log


def test_a_terminal_keeps_the_live_bar():
    console = Console(file=io.StringIO(), force_terminal=True)
    bar = make_progress(console=console)
    assert type(bar) is Progress


def test_log_line():
    assert log_line("x", 1280, 5183, 30.0) == "x: 1,280/5,183 (25 %), 42.7/s, 0:00:30"
    assert log_line("y", 7, None, 3725.0) == "y: 7, 0.0/s, 1:02:05"
