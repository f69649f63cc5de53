"""The on-policy loop of `pai lab loop trial` on a constructed judged set: what is logged, what each retrain is
given, what the trial sees, and that only the trial's rule promotes."""

import random

from eval.bench import loop_trial
from eval.bench.loop_trial import expose, flipped, run, serve, split
from eval.bench.trial_power import Consumer
from retrieval.contracts import interleaving
from retrieval.contracts.interleaving import TrialParams, Verdict

ITEMS = [
    {
        "qid": f"q{q}",
        "query": f"question number {q}",
        "relevant_ids": [f"{q}-rel"],
        "candidates": [{"id": f"{q}-{i}", "text": f"passage {i} of {q}"} for i in range(9)]
        + [{"id": f"{q}-rel", "text": f"the answer to {q}"}],
    }
    for q in range(60)
]
FIRST = {it["qid"]: [c["id"] for c in it["candidates"]] for it in ITEMS}  # the relevant one last: a weak champion
RULE = TrialParams(share=0.2, max_judged=200)


def oracle(records):
    """A 'trained' ranker that puts the relevant candidate first whatever it was given."""
    return lambda items: {it["qid"]: [f"{it['qid'][1:]}-rel", *FIRST[it["qid"]][:-1]] for it in items}


def test_split_is_stable_disjoint_and_by_qid():
    traffic, test = split(ITEMS, 0.3)
    again = split(list(reversed(ITEMS)), 0.3)
    assert {it["qid"] for it in traffic} == {it["qid"] for it in again[0]}
    assert not {it["qid"] for it in traffic} & {it["qid"] for it in test} and len(traffic) + len(test) == 60
    assert 5 < len(test) < 35


def test_serve_logs_the_context_as_the_pull_stage_exports_it():
    records, recall = serve(ITEMS[:20], FIRST, FIRST, Consumer(1.0, 0.0), 5, 0.0, random.Random(0), 7)
    assert recall == 0.0 and [r["query_id"] for r in records][:2] == [7, 8]
    c = records[0]["candidates"]
    assert [x["rank"] for x in c] == list(range(1, 11)) and [x["served_rank"] for x in c][:5] == [1, 2, 3, 4, 5]
    assert [x["shown"] for x in c] == [True] * 5 + [False] * 5
    assert [x["propensity"] for x in c] == [1.0] * 5 + [0.0] * 5  # no exploration: the top 5, surely
    assert [x["used"] for x in c] == [False] * 5 + [None] * 5  # nothing relevant shown, nothing cited
    assert c[9]["text"] == "the answer to 0" and c[9]["source"] == "lab/0-rel"
    # a candidate is the same chunk in every query it is listed in, another one another chunk: what similar questions
    # cited is read by it (retrieval/contracts/recalled.py)
    shared = [{**it, "candidates": [{"id": "common", "text": "x"}, *it["candidates"][1:]]} for it in ITEMS[:2]]
    first = {it["qid"]: [c["id"] for c in it["candidates"]] for it in shared}
    two, _ = serve(shared, first, first, Consumer(1.0, 0.0), 5, 0.0, random.Random(0), 1)
    ids = [[x["chunk_id"] for x in r["candidates"]] for r in two]
    assert ids[0][0] == ids[1][0] and len({i for row in ids for i in row}) == 19


def test_exploration_logs_the_probability_it_drew_with():
    order = [str(i) for i in range(10)]
    context, p = expose(order, 5, 0.5, random.Random(1))
    assert abs(sum(p.values()) - 5) < 1e-9 and p["0"] == 1.0 and p["4"] == 0.5 and p["9"] == 0.1
    assert len(context) == 5 and context[:4] == order[:4]


def test_only_what_a_query_listed_is_logged_previewed():
    """With exploration, the policy could list one more candidate than a query lists: only the listed ones are
    `previewed` (with their chance), so none the consumer never saw becomes a label."""
    consumer = Consumer(1.0, 0.0, previews=3, expand_relevant=1.0, expand_other=0.0)
    records, _ = serve(ITEMS[:40], FIRST, FIRST, consumer, 5, 0.5, random.Random(3), 1)
    for r in records:
        listed = [c for c in r["candidates"] if c["previewed"]]
        assert len(listed) == 3 and all(0 < c["preview_propensity"] <= 1 and not c["shown"] for c in listed)
    assert len({tuple(c["rank"] for c in r["candidates"] if c["previewed"]) for r in records}) > 1


def test_the_flipped_log_turns_used_and_ignored_over_among_the_shown_only():
    records, _ = serve(ITEMS[:5], FIRST, FIRST, Consumer(0.8, 0.5), 5, 0.0, random.Random(0), 1)
    for a, b in zip(records, flipped(records)):
        assert [x["used"] for x in b["candidates"]] == [
            None if u is None else not u for u in (x["used"] for x in a["candidates"])
        ]


def run_spied(monkeypatch, cycles=2, merges=None):
    calls, trials = [], []
    real = loop_trial.trial

    def train(records):
        calls.append(records)
        return oracle(records)

    def spy(items, champ, chall, *args, **kw):
        trials.append([it["qid"] for it in items])
        return real(items, champ, chall, *args, **kw)

    monkeypatch.setattr(loop_trial, "trial", spy)
    out = run({"d": ITEMS}, {"d": FIRST}, train, RULE, Consumer(), cycles, [0], log=lambda _: None, merges=merges)
    return out, calls, trials


def test_each_cycle_retrains_on_the_log_and_on_its_labels_turned_over(monkeypatch):
    out, calls, _ = run_spied(monkeypatch)
    assert len(calls) == 4  # per cycle: retrained, flipped
    assert calls[1] == flipped(calls[0]) and calls[3] == flipped(calls[2])
    assert len(calls[2]) > len(calls[0]) and calls[2][: len(calls[0])] == calls[0]  # everything logged so far


def test_test_items_never_reach_training_or_the_trial(monkeypatch):
    out, calls, trials = run_spied(monkeypatch)
    traffic, test = split(ITEMS, 0.3)
    held_out = {it["query"] for it in test}
    assert not held_out & {r["query"] for rs in calls for r in rs}
    assert trials and all(set(t) == {it["qid"] for it in traffic} for t in trials)
    assert out["domains"] == {"d": {"traffic": len(traffic), "test": len(test)}}


def test_the_trial_promotes_and_the_next_cycle_serves_the_promoted(monkeypatch):
    out, _, _ = run_spied(monkeypatch)
    first, second = [r for r in out["rows"] if r["cycle"] == 1], [r for r in out["rows"] if r["cycle"] == 2]
    assert first[0]["kind"] == "retrained" and first[0]["decision"] == "promote" and first[0]["gain"] == 1.0
    assert {r["champion"] for r in first} == {"first-stage"}  # every challenger of a cycle faces the same champion
    assert {r["champion"] for r in second} == {"retrained@1"}
    assert out["summary"]["d"]["better_promoted"] >= 1 and out["summary"]["d"]["wrong_promotions"] == 0


def test_promotion_happens_only_through_decide(monkeypatch):
    def never(wins, losses, ties, rule, same=0):
        return Verdict("reject", "stub", wins, losses, ties, wins + losses + ties, 0.0, 0.0)

    monkeypatch.setattr(interleaving, "decide", never)  # the rule every tally reads
    out, _, _ = run_spied(monkeypatch)
    assert {r["champion"] for r in out["rows"]} == {"first-stage"} and {r["decision"] for r in out["rows"]} == {
        "reject"
    }
    assert out["summary"]["d"]["misses"] == out["summary"]["d"]["better_by_0.05"] > 0


def test_each_merge_tries_every_challenger_on_the_same_training(monkeypatch):
    one, calls_one, _ = run_spied(monkeypatch)
    both, calls_both, trials = run_spied(monkeypatch, merges=["team-draft", "agreed-first"])
    assert calls_both == calls_one  # the training is shared: the same logs, retrained once
    assert len(both["rows"]) == 2 * len(one["rows"]) == len(trials)
    key = lambda r: (r["cycle"], r["kind"])  # noqa: E731
    by_merge = {m: [r for r in both["rows"] if r["merge"] == m] for m in ("team-draft", "agreed-first")}
    assert [key(r) for r in by_merge["team-draft"]] == [key(r) for r in by_merge["agreed-first"]]
    assert [r["gain"] for r in by_merge["agreed-first"]] == [r["gain"] for r in one["rows"]]  # judged once
    assert {r["merge"] for r in one["rows"]} == {"agreed-first"} and set(one["summary"]) == {"d", "all"}
    assert set(both["summary"]) == {"d (team-draft)", "all (team-draft)", "d (agreed-first)", "all (agreed-first)"}
    assert both["summary"]["d (agreed-first)"]["trials"] == len(by_merge["agreed-first"])


def test_the_first_merge_decides_the_promotion(monkeypatch):
    real = loop_trial.trial

    def only_agreed_first(*args, merge="team-draft", **kw):
        return {**real(*args, merge=merge, **kw), "decision": "promote" if merge == "agreed-first" else "reject"}

    monkeypatch.setattr(loop_trial, "trial", only_agreed_first)
    kept, _, _ = run_spied(monkeypatch, merges=["team-draft", "agreed-first"])
    swapped, _, _ = run_spied(monkeypatch, merges=["agreed-first", "team-draft"])
    assert {r["champion"] for r in kept["rows"]} == {"first-stage"}
    assert {r["champion"] for r in swapped["rows"] if r["cycle"] == 2} == {"retrained@1"}
    assert kept["summary"]["d (agreed-first)"]["promotions"] == len(kept["rows"]) // 2


def test_the_report_so_far_is_handed_over_after_each_seed():
    reports = []
    out = run({"d": ITEMS}, {"d": FIRST}, oracle, RULE, Consumer(), 1, [3, 4], log=lambda _: None, done=reports.append)
    assert [r["seeds_done"] for r in reports] == [[3], [3, 4]] and reports[-1] == out
    assert [len(r["rows"]) for r in reports] == [2, 4] and {r["seed"] for r in out["rows"]} == {3, 4}
