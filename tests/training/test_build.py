"""Stage build's pure core with literal records."""

import json

from retrieval.contracts.selection import parse_selection
from retrieval.logs.feedback_records import split_of
from retrieval.params import UsedParams
from tests.feedback_records import candidate, record
from training.build import BuildParams, build_examples, stats

P = BuildParams(val_fraction=0.5, shuffles=1, seed=1, max_tokens=400, chunk_tokens=200)
U = UsedParams()  # params.yaml's: what counts as used


def rec(qid, query, used, threshold=0.2, scores=(0.9, 0.8, 0.5, 0.1), text=None):
    """A record whose candidates score `scores` in rank order, the ranks in `used` used (no exposure recorded)."""
    cands = [
        candidate(r, r in used, None, None, text=text, score=s, chunk_id=10 * qid + r, source=f"/d{r}.md")
        for r, s in enumerate(scores, start=1)
    ]
    return record(cands, query, qid, threshold=threshold)


def test_split_is_by_normalised_query():
    assert split_of("What is X?", 0.5) == split_of("  what is  x? ", 0.5)
    assert {split_of(f"q{i}", 0.3) for i in range(50)} == {"train", "val"}


def test_example_shape_and_labels():
    splits, pairs, skipped = build_examples([rec(1, "alpha", {3, 1})], BuildParams(val_fraction=0.01, shuffles=0), U)
    (ex,) = splits["train"]
    assert [m["role"] for m in ex["messages"]] == ["system", "user", "assistant"]
    assert json.loads(ex["messages"][2]["content"]) == {"selected": [1, 3]}  # by retrieval rank
    assert ex["meta"]["n"] == 3  # the 0.1 candidate was below threshold: not shown
    assert "[3] d3.md\npassage 3" in ex["messages"][1]["content"] and "[4]" not in ex["messages"][1]["content"]
    assert pairs == [
        {"query": "alpha", "pos": ["passage 1", "passage 3"], "neg": ["passage 2"], "split": "train", "query_id": 1}
    ]
    assert parse_selection(ex["messages"][2]["content"], n=3).status == "ok"


def test_shuffled_copies_remap_labels():
    splits, _, _ = build_examples([rec(1, "alpha", {2})], BuildParams(val_fraction=0.01, shuffles=3, seed=7), U)
    assert len(splits["train"]) == 4
    for ex in splits["train"]:
        user = ex["messages"][1]["content"]
        (i,) = json.loads(ex["messages"][2]["content"])["selected"]
        assert user.split(f"[{i}] ")[1].split("\n")[1] == "passage 2"  # the label follows the passage


def test_bad_rows_are_skipped_and_counted():
    records = [
        rec(1, "nothing used", set()),
        rec(2, "used below threshold", {4}),
        rec(3, "all below", {1}, scores=(0.1, 0.1)),
        {**rec(4, "unlabelled", {1}), "candidates": [{**c, "used": None} for c in rec(4, "x", {1})["candidates"]]},
        {**rec(5, "text gone", {1}), "candidates": [{**c, "text": None} for c in rec(5, "x", {1})["candidates"]]},
        rec(6, "too long", {1}, text="x" * 40_000),
        rec(7, "fine", {1}),
    ]
    splits, _, skipped = build_examples(records, P, U)
    assert skipped == {
        "nothing used": 1,
        "used chunk was below threshold": 1,
        "no candidate above threshold": 1,
        "no used/ignored labels": 1,
        "candidate text changed or deleted since the query": 1,
        "longer than build.max_tokens": 1,
    }
    assert sum(len(v) for v in splits.values()) in (1, 2)  # query 7, plus its shuffled copy if in train
    splits, _, skipped = build_examples(records[:1], BuildParams(include_empty=True, shuffles=0), U)
    assert json.loads(next(ex for v in splits.values() for ex in v)["messages"][2]["content"]) == {"selected": []}


def test_stats_literals():
    splits, pairs, skipped = build_examples(
        [rec(1, "alpha", {1}), rec(2, "beta", {1, 2})],
        BuildParams(val_fraction=0.01, shuffles=0),
        U,
    )
    s = stats(splits, pairs, skipped)
    assert (s["train_examples"], s["val_examples"], s["pairs"], s["used_ratio"]) == (2, 0, 2, 0.5)


def test_only_exposed_candidates_are_taught():
    """A realistic consumer labels what it was shown: candidate 3 (never shown, no label) is neither a
    pick to learn nor a negative; the example's candidates are the labelled ones, in retrieval order."""
    r = rec(1, "alpha", {2})
    r["candidates"][2]["used"] = None
    splits, pairs, _ = build_examples([r], BuildParams(val_fraction=0.01, shuffles=0), U)
    (ex,) = splits["train"]
    assert ex["meta"]["n"] == 2 and "passage 3" not in ex["messages"][1]["content"]  # 4: below threshold
    assert json.loads(ex["messages"][2]["content"]) == {"selected": [2]}
    assert pairs[0]["pos"] == ["passage 2"] and pairs[0]["neg"] == ["passage 1"]


def test_the_selector_learns_the_one_definition_of_used():
    """The labels are read by `used_labels`: [1] on a claim chunk 1 does not hold stands, chunk 2 quoted without
    its [n] is a pick; rated -1, the context's citations are not picks (nothing used: skipped)."""
    r = rec(1, "alpha", {1}, scores=(0.9, 0.8))
    for c in r["candidates"]:
        c["shown"] = True
    r["candidates"][0]["text"] = "Bees dance to show where the flowers are."
    r["candidates"][1]["text"] = "Aspirin lowers fever in adults within hours."
    r["answer"] = "Aspirin lowers fever in adults within hours. Vaccines prevent measles outbreaks [1]."
    p = BuildParams(val_fraction=0.01, shuffles=0)
    (ex,) = build_examples([r], p, U)[0]["train"]  # the defaults: the quote counts, the citation stands
    assert json.loads(ex["messages"][2]["content"]) == {"selected": [1, 2]}
    (ex,) = build_examples([r], p, UsedParams(min_uncited=0.0))[0]["train"]  # off: as logged
    assert json.loads(ex["messages"][2]["content"]) == {"selected": [1]}
    splits, _, skipped = build_examples([{**r, "rating": -1}], p, U)
    assert splits == {"train": [], "val": []} and skipped == {"nothing used": 1}
