"""The trial simulation of `pai lab trial`: the same merge and rule as the service, on given orders."""

import random

import pytest

from eval.bench.trial_power import Consumer, cites, context, trial
from retrieval.contracts.interleaving import BOTH, CHALLENGER, CHAMPION, TrialParams

ITEMS = [
    {
        "qid": str(q),
        "relevant_ids": [f"{q}-rel"],
        "candidates": [{"id": f"{q}-{i}"} for i in range(9)] + [{"id": f"{q}-rel"}],
    }
    for q in range(30)
]
BEST = {it["qid"]: [f"{it['qid']}-rel", *(f"{it['qid']}-{i}" for i in range(9))] for it in ITEMS}
WORST = {q: list(reversed(r)) for q, r in BEST.items()}
RULE = TrialParams(share=0.5, max_judged=200)


def test_a_challenger_that_ranks_the_relevant_chunk_first_is_promoted_and_costs_nothing():
    out = trial(ITEMS, WORST, BEST, RULE, Consumer(), k=5, seed=0)
    assert out["decision"] == "promote" and out["judged"] < 60
    assert out["cost"] < 0  # users got more than the champion alone gave them
    # its evidence raised the share interleaved: fewer of the users' queries than at the starting share
    assert out["queries"] / RULE.max_share <= out["served"] < out["queries"] / RULE.share


def test_a_worse_challenger_is_rejected_and_its_cost_is_the_share_of_the_loss():
    out = trial(ITEMS, BEST, WORST, RULE, Consumer(), k=5, seed=0)
    assert out["decision"] == "reject" and out["cost"] == 0.0  # the champion's first pick is in every context of 5
    one = trial(ITEMS, BEST, WORST, RULE, Consumer(), k=1, seed=0)  # one slot: the coin gives it away half the time
    assert one["decision"] == "reject" and abs(one["cost"] - RULE.share * 0.5) < 0.1


def test_the_same_ranking_is_never_judged_and_is_rejected_when_the_cited_budget_is_spent():
    out = trial(ITEMS, BEST, BEST, RULE, Consumer(), k=5, seed=0)
    assert out == {
        "decision": "reject",
        "judged": 0,
        "cited": RULE.max_cited,
        "queries": out["queries"],
        "served": 2 * out["queries"],  # no evidence either way: the share stays at 0.5
        "cost": 0.0,
        "served_fixed": 2 * out["queries"],
        "cost_fixed": 0.0,
    }


@pytest.mark.parametrize("merge", ["agreed-first", "team-draft"])
def test_citations_that_ignore_relevance_favour_neither_side_only_under_agreed_first(merge):
    # the challenger's own item (9) tops its list; the champion's (5) is its fifth: under team-draft's first 5 the
    # champion's is never shown, so a consumer citing whatever it sees credits the challenger alone
    a, b = [1, 2, 3, 4, 5, 6, 7, 8], [9, 1, 2, 3, 4, 5, 6, 7]
    rng = random.Random(0)
    net = 0
    for _ in range(2000):
        shown, _, side = context(a, b, rng, 5, merge)
        cited = {x for x in shown if rng.random() < 0.3}
        net += sum((side[x] == CHALLENGER) - (side[x] == CHAMPION) for x in cited)
    if merge == "agreed-first":
        assert abs(net) < 120  # +1 / -1 for about 600 citations of the one disputed slot: within ~5 sd of fair coins
    else:
        assert net > 500


def test_the_merges_measured_against_team_draft_show_what_they_say():
    # champion 1 2 3 4 5 6, challenger 2 1 3 9 8 6: both top 5 hold 1 2 3; then 4 5 against 9 8
    a, b = [1, 2, 3, 4, 5, 6], [2, 1, 3, 9, 8, 6]
    for seed in range(20):
        shown, _, side = context(a, b, random.Random(seed), 5, "agreed-first")
        assert shown[:3] == [1, 2, 3] and [side[x] for x in shown[:3]] == [BOTH] * 3
        assert sorted(side[x] for x in shown[3:]) == [CHALLENGER, CHAMPION]  # one disagreement of each side
        shown, _, side = context(a, b, random.Random(seed), 5, "union")
        assert sorted(shown) == [1, 2, 3, 4, 5, 8, 9] and side[9] == CHALLENGER and side[4] == CHAMPION
        shown, _, side = context(a, b, random.Random(seed), 5, "team-draft")  # from the top: 1, 2, 3 and two more
        assert len(shown) == 5 and {1, 2, 3} <= set(shown)
    with pytest.raises(ValueError, match="merge 'mixed'"):
        context(a, b, random.Random(0), 5, "mixed")


def test_under_agreed_first_equal_rankers_split_the_credit():
    # two rankings that disagree only below the top 3, and a consumer who cites each side's item alike
    a, b = [1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 6, 7, 4, 5]
    rng = random.Random(0)
    credit = [context(a, b, rng, 4, "agreed-first") for _ in range(2000)]
    wins = sum((side[shown[-1]] == CHALLENGER) - (side[shown[-1]] == CHAMPION) for shown, _, side in credit)
    assert abs(wins) < 150  # +1 / -1 per query: within about 3 sd of 2,000 fair coins


def test_the_previews_list_the_rest_of_each_sides_own_items_and_only_those_have_a_side():
    # both top 5 hold 1 2 3; the champion's own are 4 5, the challenger's 9 8; 6 is in neither top 5
    a, b = [1, 2, 3, 4, 5, 6, 7], [2, 1, 3, 9, 8, 6, 7]
    for seed in range(20):
        shown, listed, side = context(a, b, random.Random(seed), 5, "agreed-first", previews=3)
        assert sorted(shown[3:]) == [4, 9]  # each side's best own item in the context
        assert sorted(listed[:2]) == [5, 8] and listed[2] == 6  # the rest of them first, then the draft goes on
        assert (side[5], side[8]) == (CHAMPION, CHALLENGER) and 6 not in side and 7 not in side
        assert context(a, b, random.Random(seed), 5, "agreed-first")[1] == []  # no previews asked, none listed


def test_a_consumer_citing_context_and_previews_alike_favours_neither_side():
    a, b = [1, 2, 3, 4, 5, 6, 7, 8], [9, 1, 2, 3, 4, 5, 6, 7]
    blind = Consumer(p_relevant=0.3, p_other=0.3, previews=8, expand_relevant=0.5, expand_other=0.5)
    rng, net, cited_previews = random.Random(0), 0, 0
    for _ in range(3000):
        shown, listed, side = context(a, b, rng, 5, "agreed-first", previews=8)
        used = cites(shown, listed, set(), blind, rng)
        cited_previews += len(used & set(listed))
        net += sum((side.get(x) == CHALLENGER) - (side.get(x) == CHAMPION) for x in used)
    assert cited_previews > 300  # the previews were read and cited
    assert abs(net) < 170  # +1 / -1 for about 1,300 citations of the disputed items: within ~5 sd of fair coins


def test_previews_decide_queries_the_context_leaves_tied():
    # both top 2 hold the first item; the champion's own is an irrelevant one, the challenger's the relevant one:
    # the coin puts one in the context and the other a line below, where only a consumer reading previews finds it
    champ = {it["qid"]: [f"{it['qid']}-0", f"{it['qid']}-1", f"{it['qid']}-rel"] for it in ITEMS}
    chall = {it["qid"]: [f"{it['qid']}-0", f"{it['qid']}-rel", f"{it['qid']}-1"] for it in ITEMS}
    blind = trial(ITEMS, champ, chall, RULE, Consumer(), k=2, seed=0)
    reading = trial(ITEMS, champ, chall, RULE, Consumer(previews=8, expand_relevant=0.8), k=2, seed=0)
    assert blind["decision"] == reading["decision"] == "promote"
    assert reading["queries"] < blind["queries"]  # fewer queries to the same decision
