"""The trial simulation of `pai lab trial`: the same merge and rule as the service, on given orders."""

from eval.bench.trial_power import Consumer, trial
from retrieval.contracts.interleaving import TrialParams

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


def test_a_worse_challenger_is_rejected_and_its_cost_is_the_share_of_the_loss():
    out = trial(ITEMS, BEST, WORST, RULE, Consumer(), k=5, seed=0)
    assert out["decision"] == "reject" and out["cost"] == 0.0  # the champion's first pick is in every context of 5
    one = trial(ITEMS, BEST, WORST, RULE, Consumer(), k=1, seed=0)  # one slot: the coin gives it away half the time
    assert one["decision"] == "reject" and abs(one["cost"] - RULE.share * 0.5) < 0.1


def test_the_same_ranking_never_wins_and_is_rejected_when_the_budget_is_spent():
    out = trial(ITEMS, BEST, BEST, RULE, Consumer(), k=5, seed=0)
    assert out == {"decision": "reject", "judged": RULE.max_judged, "queries": out["queries"], "cost": 0.0}
