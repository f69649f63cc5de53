"""The trial's merge and its stopping rule: literal in, literal out."""

import random

import pytest

from retrieval.contracts.interleaving import (
    BOTH,
    CHALLENGER,
    CHAMPION,
    TrialParams,
    decide,
    draft_propensity,
    log_evidence,
    outcome,
    sides,
    team_draft,
)


def test_team_draft_of_two_equal_rankings_is_that_ranking():
    merged = team_draft([1, 2, 3, 4], [1, 2, 3, 4], random.Random(0))
    assert [x for x, _ in merged] == [1, 2, 3, 4]
    teams = [t for _, t in merged]
    assert sorted(teams[:2]) == sorted(teams[2:]) == [CHALLENGER, CHAMPION]  # each pair: one item each


def test_team_draft_keeps_each_teams_order_and_balance():
    a, b = [1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]
    for seed in range(20):
        merged = team_draft(a, b, random.Random(seed))
        assert sorted(x for x, _ in merged) == a  # every item once
        for team, ranking in ((CHAMPION, a), (CHALLENGER, b)):
            mine = [x for x, t in merged if t == team]
            # each team's items come in its own order, each its best one not yet placed at its turn
            assert all(ranking.index(x) < ranking.index(y) for x, y in zip(mine, mine[1:]))
        for i in range(1, len(merged) + 1):
            picks = [t for _, t in merged[:i]]
            assert abs(picks.count(CHAMPION) - picks.count(CHALLENGER)) <= 1


def test_team_draft_literal():
    # seed 1: the first coin gives the challenger the first pick
    merged = team_draft([1, 2, 3], [3, 1, 2], random.Random(1))
    assert merged[0] in ((3, CHALLENGER), (1, CHAMPION))
    assert {x for x, _ in merged} == {1, 2, 3}
    assert team_draft([1, 2], [], random.Random(0)) == [(1, CHAMPION), (2, CHAMPION)]


def test_sides_say_whose_context_of_the_same_size_held_each_item():
    # champion 1 2 3 4, challenger 3 9 1 8: a context of 3 from the merge
    assert sides([1, 3, 9], [1, 2, 3, 4], [3, 9, 1, 8]) == {1: BOTH, 3: BOTH, 9: CHALLENGER}
    assert sides([1, 3, 2, 9], [1, 2, 3, 4], [3, 9, 1, 8]) == {1: BOTH, 3: BOTH, 2: CHAMPION, 9: CHALLENGER}
    # a relevant item both serve earns nobody credit: only what one side alone would serve decides
    s = sides([1, 3, 9], [1, 2, 3, 4], [3, 9, 1, 8])
    assert outcome(s, {1, 3}) == 0 and outcome(s, {1, 9}) == 1


def test_outcome_credits_only_shown_items_by_team():
    teams = {1: CHAMPION, 7: CHALLENGER, 2: CHAMPION, 9: CHALLENGER}
    assert outcome(teams, {7}) == 1
    assert outcome(teams, {1, 2, 9}) == -1
    assert outcome(teams, {1, 7}) == 0
    assert outcome(teams, {15}) == 0  # a citation of something not shown credits no team


@pytest.mark.parametrize(
    "wins,losses,ties,decision",
    [
        (40, 10, 30, "promote"),
        (10, 40, 30, "reject"),
        (5, 3, 10, None),
        (0, 0, 0, None),
        (300, 290, 210, "reject"),  # 800 cited queries and no proof of a gain: the champion stays
    ],
)
def test_decide_on_constructed_tallies(wins, losses, ties, decision):
    assert decide(wins, losses, ties, TrialParams()).decision == decision


def test_evidence_grows_with_wins_and_shrinks_with_losses():
    assert log_evidence(0, 0, 0.2) == pytest.approx(0.0)
    assert log_evidence(30, 10, 0.2) > log_evidence(20, 10, 0.2) > log_evidence(20, 20, 0.2)


def test_no_better_challenger_is_promoted_at_most_alpha_of_the_time():
    """A fair coin per cited query, the rule read after every one: the exact chance of a promotion (every path
    of wins and losses to max_judged, summed) stays under alpha, as Ville's inequality promises. A fixed-n sign
    test read after every query would promote a no-better challenger far more often."""
    rule = TrialParams(max_judged=300)
    alive, promoted = {(0, 0): 1.0}, 0.0
    for _ in range(rule.max_judged):
        step: dict = {}
        for (wins, losses), mass in alive.items():
            for nxt in ((wins + 1, losses), (wins, losses + 1)):
                d = decide(*nxt, 0, rule).decision
                if d == "promote":
                    promoted += mass / 2
                elif d is None:
                    step[nxt] = step.get(nxt, 0.0) + mass / 2
        alive = step
    assert 0.005 < promoted <= rule.alpha


def test_params_are_checked():
    assert TrialParams(share=0, alpha=1.5, max_judged=0, max_effect=0.7).problems() == [
        "trial.share must be in (0, 1]",
        "trial.alpha must be in (0, 1)",
        "trial.max_judged must be >= 1",
        "trial.max_effect must be in (0, 0.5]",
    ]


def test_draft_propensity_is_the_merge_s_own_frequency():
    """Each item's probability of landing among the merge's first 5 (and first 15) over the coins equals how often
    20,000 seeded merges put it there (within 0.01); the sums are the depths; what both rank first is always shown."""
    champion = list(range(20))
    challenger = [3, 7, 0, 12, 1, 15, 2, 4, 5, 6, 8, 9, 10, 11, 13, 14, 16, 17, 18, 19]
    top, deep = draft_propensity(champion, challenger, 15, 5)
    rng, n = random.Random(1), 20_000
    seen_top, seen_deep = {}, {}
    for _ in range(n):
        merged = [x for x, _ in team_draft(champion, challenger, rng)]
        for x in merged[:5]:
            seen_top[x] = seen_top.get(x, 0) + 1
        for x in merged[:15]:
            seen_deep[x] = seen_deep.get(x, 0) + 1
    assert max(abs(seen_top.get(x, 0) / n - top.get(x, 0.0)) for x in champion) < 0.01
    assert max(abs(seen_deep.get(x, 0) / n - deep.get(x, 0.0)) for x in champion) < 0.01
    assert sum(top.values()) == pytest.approx(5) and sum(deep.values()) == pytest.approx(15)
    assert top[0] == top[3] == 1.0 and 0 < top[12] < 1  # each side's best always; a side's 3rd only on its coin
    assert draft_propensity(champion, champion, 5) == ({x: 1.0 for x in range(5)},) * 2  # no disagreement, no chance
