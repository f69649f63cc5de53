"""The trial audit of `python -m eval.bench.trial_audit`: the log's tally beside the judged set's, on given records;
simulated trials on given orders with the service's budget cut."""

from eval.bench.trial_audit import audit_records, budget_cut, replay_trials, truth
from retrieval.contracts.interleaving import TrialParams
from retrieval.params import SearchParams, UsedParams

SOURCES = {1: "scifact/corpus.jsonl#10", 2: "scifact/corpus.jsonl#20", 3: "scifact/corpus.jsonl#30"}
USED = UsedParams(min_uncited=0, void_thumbs_down=False)


def record(query, shown, used):
    """A cited trial query: (chunk id, team) shown in rank order, the ranks used."""
    return {
        "query": query,
        "answer": None,
        "rating": None,
        "candidates": [
            {"rank": r, "chunk_id": cid, "shown": True, "team": team, "used": r in used, "propensity": 1.0}
            for r, (cid, team) in enumerate(shown, start=1)
        ],
    }


def test_a_false_cite_of_the_champions_own_chunk_is_a_loss_by_the_log_and_nothing_by_the_judged_set():
    relevant = {"claim a": {"10"}, "claim b": {"10"}}
    records = [
        # chunk 1 (relevant, both serve it) and the champion's own chunk 2 (not relevant), both cited
        record("claim a", [(1, "both"), (2, "champion"), (3, "challenger")], used={1, 2}),
        # both would serve the whole context: the same, not judged
        record("claim b", [(1, "both"), (2, "both")], used={1}),
        record("not in the judged set", [(1, "champion")], used={1}),
    ]
    out = audit_records(records, relevant, SOURCES, USED)
    assert out["by_the_log"] == {"wins": 0, "losses": 1, "ties": 0, "same": 1}
    assert out["by_the_judged_set"] == {"wins": 0, "losses": 0, "ties": 1, "same": 1}
    assert out["own_chunks_shown"] == {"champion": 1, "challenger": 1}
    assert out["own_chunks_cited_not_relevant"] == {"champion": 1, "challenger": 0}


def test_the_audit_counts_questions_not_queries_and_names_the_outcomes_a_false_cite_decided():
    relevant = {"claim a": {"10"}, "claim b": {"10"}}
    previewed = record("claim a", [(2, "both"), (3, "champion")], used=set())
    previewed["candidates"].append(  # the challenger's own relevant chunk, listed as a preview, read and cited
        {"rank": 3, "chunk_id": 1, "shown": False, "previewed": True, "team": "challenger", "used": True}
    )
    records = [
        previewed,
        dict(previewed),  # the same question asked again: one question
        # the champion's own chunk 2 is not relevant and is cited: a loss no relevant chunk decided
        record("claim b", [(1, "both"), (2, "champion"), (3, "challenger")], used={2}),
    ]
    out = audit_records(records, relevant, SOURCES, USED)
    assert out["by_the_log"] == {"wins": 2, "losses": 1, "ties": 0, "same": 0}
    assert out["questions"] == 2
    assert out["questions_with_own_relevant"] == {"champion": 0, "challenger": 1}
    assert out["decided_by_not_relevant"] == {"win": 0, "loss": 1}


def test_budget_cut_is_the_services_rule():
    tokens = {"a": 600, "b": 600, "c": 600, "d": 10}
    assert budget_cut(["a", "b", "c", "d"], tokens, 1500, 0) == 2
    assert budget_cut(["a", "b", "c", "d"], tokens, 1500, 3) == 3  # the floor before the budget


def test_a_challenger_that_serves_the_relevant_chunk_wins_its_replayed_trial_and_the_truth_says_why():
    items = [
        {
            "qid": str(q),
            "relevant_ids": [f"{q}-rel"],
            "candidates": [{"id": f"{q}-{i}", "text": "x" * 400} for i in range(9)] + [{"id": f"{q}-rel", "text": "y"}],
        }
        for q in range(30)
    ]
    worse = {it["qid"]: [c["id"] for c in it["candidates"]] for it in items}  # the relevant chunk last
    better = {q: [order[-1], *order[:-1]] for q, order in worse.items()}  # first
    search = SearchParams(token_budget=500, min_chunks=3)  # a context of 3 short chunks
    assert truth(items, worse, better, search) == {"served_recall_diff": 1.0, "recall@5_diff": 1.0}
    rule = TrialParams(max_judged=200)
    up = replay_trials(items, worse, better, search, rule, "agreed-first", 0, 0.8, 0.05)
    down = replay_trials(items, better, worse, search, rule, "agreed-first", 0, 0.8, 0.05)
    assert up["decision"] == "promote" and up["losses"] == 0
    assert down["decision"] == "reject" and down["worse"]
