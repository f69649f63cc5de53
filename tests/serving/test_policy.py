"""The serving policy, in the picker: a fast selector answers inline, a slow one refines in the
background and serves repeats, a cascade does both; the context's floor tops a short pick up."""

import json

import pytest

from retrieval.contracts.selection import top_up
from retrieval.query.search import Candidate
from serving.picker import Picker
from serving.selectors import CascadeSelector


def cands(n):
    return [
        Candidate(r, 100 + r, f"/d/{r}.md", None, None, 1, 2, f"text {r}", f"h{r}", 1 - r / 50, 3)
        for r in range(1, n + 1)
    ]


class Fixed:
    """Answers `picks` (candidate numbers), whatever the candidates."""

    def __init__(self, version, picks, inline):
        self.version, self.picks, self.answers_inline = version, picks, inline
        self.calls = 0

    def answer(self, query, cands, k, query_vec=None):
        self.calls += 1
        return json.dumps({"selected": self.picks})


def test_a_fast_selector_answers_every_new_query_inline():
    fast = Fixed("ranker:1", [3, 2, 1], inline=True)
    picker = Picker(fast)
    try:
        for q in ("first query", "second query"):
            s = picker.serve(q, cands(6))
            assert (s.version, s.status, s.later) == ("ranker:1", "ok", None)
            assert [c.rank for c in s.chosen] == [3, 2, 1] and s.active == "ranker:1"
        assert fast.calls == 2
    finally:
        picker.close()


def test_a_slow_selector_refines_in_the_background_and_serves_the_repeat():
    slow = Fixed("llm:1", [4, 1], inline=False)
    picker = Picker(slow)
    try:
        s = picker.serve("how do bees work?", cands(6))
        assert (s.version, s.status, s.later) == ("first-stage", "pending", slow)
        assert [c.rank for c in s.chosen] == [1, 2, 3, 4, 5] and slow.calls == 0
        picker.select("how do bees work?", cands(6), s.later)  # what select_later runs
        again = picker.serve("How do bees  work?", cands(6))
        # the cached pick of two, topped up to the floor of 3 from the first-stage order
        assert (again.version, again.status, again.later) == ("llm:1", "cached", None)
        assert [c.rank for c in again.chosen] == [4, 1, 2] and again.topped_up == 1
        forced = picker.serve("something new", cands(6), inline=True)  # --inline: the slow one answers now
        assert (forced.version, forced.status, forced.later) == ("llm:1", "ok", None)
    finally:
        picker.close()


def test_a_cascade_answers_with_its_fast_side_and_queues_its_slow_side():
    fast, slow = Fixed("ranker:1", [2, 1, 3], inline=True), Fixed("llm:1", [5, 4, 3], inline=False)
    picker = Picker(CascadeSelector(fast, slow))
    try:
        s = picker.serve("q", cands(6))
        assert (s.version, s.later, s.active) == ("ranker:1", slow, "cascade(ranker:1>llm:1)")
        picker.select("q", cands(6), s.later)
        again = picker.serve("q", cands(6))
        assert (again.version, again.status, again.later) == ("llm:1", "cached", None)
        assert [c.rank for c in again.chosen] == [5, 4, 3] and fast.calls == 1
    finally:
        picker.close()


@pytest.mark.parametrize("picks,want", [([], [1, 2, 3]), ([4], [4, 1, 2]), ([2, 5, 6, 1], [2, 5, 6, 1])])
def test_the_floor_tops_a_short_pick_up_from_the_first_stage_order(picks, want):
    picker = Picker(Fixed("llm:2", picks, inline=True), min_chunks=3)
    try:
        s = picker.serve("q", cands(8))
        assert [c.rank for c in s.chosen] == want and s.topped_up == len(want) - len(picks)
        assert picker.counts["topped_up"] == (len(picks) < 3)
        assert picker.serve("q", cands(2)).chosen  # fewer candidates than the floor: all of them
        assert picker.serve("q", []).chosen == [] and picker.serve("q", []).later is None
    finally:
        picker.close()


def test_top_up_literals():
    assert top_up([], 5, 3) == (1, 2, 3)
    assert top_up([5], 5, 3) == (5, 1, 2)
    assert top_up([2, 2], 2, 3) == (2, 1)
    assert top_up([3, 1, 2, 4], 4, 3) == (3, 1, 2, 4)  # never cut
    assert top_up([], 0, 3) == () and top_up([1], 5, 0) == (1,)


def test_exploration_gives_the_last_slot_to_a_candidate_below_the_cut_with_logged_propensities():
    picker = Picker(Fixed("ranker:1", [1, 2, 3, 4, 5], inline=True), explore_rate=0.25, seed=7)
    try:
        served = [picker.serve(f"q{i}", cands(20)) for i in range(2000)]
    finally:
        picker.close()
    explored = [s for s in served if s.explored is not None]
    assert 0.2 < len(explored) / len(served) < 0.3 and picker.counts["explored"] == len(explored)
    for s in served[:50]:
        p = s.propensity
        assert p[1] == p[4] == 1.0 and p[5] == pytest.approx(0.75) and p[6] == pytest.approx(0.25 / 15)
        assert sum(p.values()) == pytest.approx(5)  # E[context size]: exploration swaps a slot, it adds none
        assert [c.rank for c in s.context][:4] == [1, 2, 3, 4] and len(s.context) == 5
    assert {s.context[-1].rank for s in explored} <= set(range(6, 21)) and len({s.explored for s in explored}) > 10
    assert all(s.context[-1].rank == s.explored for s in explored)
    off = Picker(Fixed("ranker:1", [1, 2, 3, 4, 5], inline=True))
    try:
        s = off.serve("q", cands(20))
        assert s.explored is None and s.propensity == {r: 1.0 for r in range(1, 6)}
    finally:
        off.close()
