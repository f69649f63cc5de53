"""The trial's merge and its stopping rule: literal in, literal out."""

import random

import pytest

from retrieval.contracts.interleaving import (
    BOTH,
    CHALLENGER,
    CHAMPION,
    TrialParams,
    agreed_first,
    agreed_propensity,
    decide,
    differs,
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
    assert TrialParams(max_judged=800, max_cited=799).problems() == ["trial.max_cited must be >= trial.max_judged"]


def assert_frequencies(draw, chances: dict[int, dict], items, n: int = 20_000) -> None:
    """How often `n` draws of an order put each item among its first d equals `chances[d]` (within 0.01)."""
    seen = {d: {} for d in chances}
    for _ in range(n):
        order = draw()
        for d in chances:
            for x in order[:d]:
                seen[d][x] = seen[d].get(x, 0) + 1
    for d, p in chances.items():
        assert max(abs(seen[d].get(x, 0) / n - p.get(x, 0.0)) for x in items) < 0.01, d


def test_draft_propensity_is_the_merge_s_own_frequency():
    """Each item's probability of landing among the merge's first 5 (and first 15) over the coins equals how often
    20,000 seeded merges put it there (within 0.01); the sums are the depths; what both rank first is always shown."""
    champion = list(range(20))
    challenger = [3, 7, 0, 12, 1, 15, 2, 4, 5, 6, 8, 9, 10, 11, 13, 14, 16, 17, 18, 19]
    top, deep = draft_propensity(champion, challenger, 15, 5)
    rng = random.Random(1)
    assert_frequencies(lambda: [x for x, _ in team_draft(champion, challenger, rng)], {5: top, 15: deep}, champion)
    assert sum(top.values()) == pytest.approx(5) and sum(deep.values()) == pytest.approx(15)
    assert top[0] == top[3] == 1.0 and 0 < top[12] < 1  # each side's best always; a side's 3rd only on its coin
    assert draft_propensity(champion, champion, 5) == ({x: 1.0 for x in range(5)},) * 2  # no disagreement, no chance


def test_agreed_first_serves_the_agreed_items_then_half_of_each_sides_own():
    # top 6: both hold 1 2 3 6; the champion alone 4 5, the challenger alone 9 8 (its best): two slots for the four
    champion, challenger = [1, 2, 3, 4, 5, 6, 7, 8, 9], [9, 1, 8, 2, 3, 6, 4, 5, 7]
    for seed in range(20):
        order, agreed = agreed_first(champion, challenger, 6, random.Random(seed))
        assert agreed == 4 and order[:4] == [1, 2, 3, 6] and sorted(order) == list(range(1, 10))
        side = sides(order[:6], champion, challenger)
        assert sorted(side[x] for x in order[4:6]) == [CHALLENGER, CHAMPION]  # one each, whatever the coin
        assert set(order[4:6]) <= {4, 5, 8, 9} and differs(side)
    same, _ = agreed_first(champion, champion, 6, random.Random(0))
    assert same == champion and not differs(sides(same[:6], champion, champion))


def test_agreed_propensity_is_the_served_order_s_own_frequency():
    champion = list(range(20))
    challenger = [3, 7, 0, 12, 1, 15, 2, 4, 5, 6, 8, 9, 10, 11, 13, 14, 16, 17, 18, 19]
    top, deep = agreed_propensity(champion, challenger, 6, 14)
    rng = random.Random(2)
    assert_frequencies(lambda: agreed_first(champion, challenger, 6, rng)[0], {6: top, 14: deep}, champion)
    assert sum(top.values()) == pytest.approx(6) and sum(deep.values()) == pytest.approx(14)
    # both top 6 hold 0 1 3: always shown; three slots for each side's own three (2 4 5 against 7 12 15): each
    # side's best always, its second on the coin, its third never
    assert top[0] == top[1] == top[3] == top[2] == top[7] == 1.0
    assert top[4] == top[12] == 0.5 and 5 not in top and 15 not in top


def test_queries_whose_context_both_would_serve_are_not_judged_but_end_a_trial_in_the_end():
    rule = TrialParams(max_judged=50, max_cited=200)
    assert decide(3, 1, 10, rule, same=100).decision is None
    v = decide(3, 1, 10, rule, same=186)
    assert v.decision == "reject" and (v.judged, v.same) == (14, 186) and "within 200 cited queries" in v.reason
    assert decide(0, 0, 50, rule).decision == "reject"  # max_judged as before


def test_the_share_starts_at_share_rises_with_the_evidence_for_the_challenger_and_stops_at_max_share():
    rule = TrialParams(share=0.2, max_share=0.6)
    assert rule.share_at(1.0) == 0.2  # no evidence yet
    assert rule.share_at(0.01) == 0.2  # evidence against: never below the registered share
    assert rule.share_at(2.0) == 0.4
    assert rule.share_at(50.0) == 0.6
    fixed = TrialParams(share=0.8, max_share=0.6)  # a max at or below share: fixed
    assert fixed.share_at(0.1) == fixed.share_at(100.0) == 0.8
    assert TrialParams(max_share=0.0).problems() == ["trial.max_share must be in (0, 1]"]
