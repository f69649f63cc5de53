"""The picker: whatever a selector does, a valid pick comes back; good picks are cached per query."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.logs.feedback_records import normalize_query
from retrieval.query.search import Candidate
from serving.picker import Picker


def cands(n):
    return [
        Candidate(r, 100 + r, f"/d/{r}.md", None, None, 1, 2, f"text {r}", f"h{r}", 1 - r / 50, 3)
        for r in range(1, n + 1)
    ]


class Echo:
    answers_inline = False  # a slow selector: it refines in the background
    version = "echo:1"

    def __init__(self, raw):
        self.raw = raw

    def answer(self, query, cands, k, query_vec=None):
        if isinstance(self.raw, Exception):
            raise self.raw
        return self.raw


@settings(max_examples=300, deadline=None)
@given(
    raw=st.one_of(
        st.text(max_size=80),
        st.builds(lambda xs: json.dumps({"selected": xs}), st.lists(st.integers(-3, 25), max_size=9)),
        st.just(ValueError("boom")),
    ),
    n=st.integers(1, 20),
)
def test_any_selector_output_gives_a_valid_pick(raw, n):
    picker = Picker(Echo(raw), k=5, timeout_s=5)
    try:
        pick = picker.select("q", cands(n))
    finally:
        picker.close()
    assert len(pick.ranks) <= 5 and len(set(pick.ranks)) == len(pick.ranks)
    assert set(pick.ranks) <= set(range(1, n + 1))
    assert pick.ids == tuple(100 + r for r in pick.ranks)
    if pick.status == "fallback":
        assert pick.ranks == tuple(range(1, min(n, 5) + 1))


def test_cache_serves_the_same_query_only_while_its_chunks_are_candidates():
    picker = Picker(Echo('{"selected": [3, 1]}'))
    try:
        picker.select("How do  Bees work?", cands(5))
        assert picker.cached("how do bees work?", cands(5)).ids == (103, 101)
        assert picker.cached("how do bees work?", cands(2)) is None  # chunk 103 no longer a candidate
        assert picker.cached("something else", cands(5)) is None
        assert picker.counts["ok"] == 1 and picker.counts["cached"] == 1
    finally:
        picker.close()
    assert normalize_query("  A  b ") == "a b"


def test_background_selections_beyond_the_backlog_bound_are_skipped_and_counted():
    """A slow selector under a flood of queries: at most `max_pending` wait or run, the rest are skipped."""
    import threading

    release = threading.Event()

    class Slow(Echo):
        def answer(self, query, cands, k, query_vec=None):
            release.wait(10)
            return '{"selected": [1]}'

    picker = Picker(Slow(None), timeout_s=10, max_pending=3)
    done = []
    try:
        for i in range(10):
            picker.select_later(f"q{i}", cands(4), done.append)
        assert picker.counts["skipped_backlog"] == 7
        release.set()
    finally:
        picker.close()  # waits for the accepted ones
    assert len(done) == 3 and all(p.ids == (101,) for p in done)
    picker2 = Picker(Echo('{"selected": [2]}'), max_pending=1)  # a finished one frees its slot
    got = []
    try:
        for i in range(3):
            picker2.select_later(f"q{i}", cands(4), got.append)
            picker2._background.submit(lambda: None).result(timeout=10)  # the queue is drained in order
    finally:
        picker2.close()
    assert len(got) == 3 and picker2.counts["skipped_backlog"] == 0
