"""One question, one vote: a question asked k times (a user's habit, or a trial's repeated traffic) weighs 1/k each
time in the ranker's fits, so it teaches its labels once, not k times their weight."""

import pytest

from training.feedback_rankings import rankings
from training.ranker_fit import _padded


def record(query: str, used: int) -> dict:
    cands = [
        {
            "rank": r,
            "score": 0.5,
            "text": f"passage {r}",
            "heading": None,
            "parent_heading": None,
            "used": True if r == used else False if r <= 3 else None,
            "shown": r <= 3,
            "propensity": 1.0,
        }
        for r in range(1, 6)
    ]
    return {"query": query, "threshold": None, "candidates": cands}


def test_a_question_asked_many_times_votes_once():
    log = [record("Why is the sky blue?", 1) for _ in range(4)] + [record("why is the  SKY blue?", 2)]
    log += [record("How do tides work?", 3)]
    groups = rankings(log, "train", 0.0)
    votes = {g["query"]: g["votes"] for g in groups}
    assert votes == {"Why is the sky blue?": 0.2, "why is the  SKY blue?": 0.2, "How do tides work?": 1.0}
    _, _, target = _padded(groups)
    rows = target.sum(1).tolist()
    assert sum(rows[:5]) == pytest.approx(rows[5])  # the five askings of one question weigh what one other does
    assert sum(rows) == pytest.approx(len(groups))  # scaled: the votes average 1
