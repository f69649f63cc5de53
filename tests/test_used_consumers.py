"""One definition of used: build's examples, train_ranker's rankings and evaluate's held-out feedback read the
same labels from the same pulled log (`retrieval.logs.used.used_labels`, params.yaml `used`)."""

import json

from eval.items import feedback_items
from retrieval.params import UsedParams
from training.build import BuildParams, build_examples
from training.train_ranker import RankerParams, feedback_groups

ASPIRIN = "Aspirin lowers fever in adults within two hours of a single dose."
BEES = "Bees communicate the distance of flowers through a waggle dance."
PARIS = "Paris is the capital of France and its largest city."
MEASLES = "Vaccines prevent measles outbreaks in children, a review found."


def cand(rank, text, used, shown=True):
    return {
        **{"rank": rank, "chunk_id": rank, "content_hash": "h", "score": 0.9, "source": "s.md", "heading": None},
        **{"parent_heading": None, "text": text, "used": used, "shown": shown, "propensity": 1.0 if shown else 0.0},
    }


def record(qid, query, answer, cands, rating=None):
    return {
        **{"query_id": qid, "query": query, "threshold": None, "selector_version": "similarity"},
        **{"rating": rating, "answer": answer, "candidates": cands},
    }


RECORDS = [
    # rated -1: its context's citation is voided, nothing is used
    record(
        1,
        "does aspirin lower fever",
        "Aspirin lowers fever in adults [1].",
        [cand(1, ASPIRIN, True), cand(2, PARIS, False)],
        rating=-1,
    ),
    # chunk 2 quoted near-verbatim without its [2]: used beside the cited chunk 1
    record(
        2,
        "aspirin and bees",
        f"Aspirin lowers fever in adults within two hours [1]. {BEES}",
        [cand(1, ASPIRIN, True), cand(2, BEES, False), cand(3, PARIS, False)],
    ),
    # chunk 3 cited outside the context (a judge's label, shown False): its label stands
    record(
        3,
        "do vaccines prevent measles",
        "Vaccines prevent measles outbreaks in children [1].",
        [cand(1, MEASLES, True), cand(2, PARIS, False), cand(3, BEES, True, shown=False)],
    ),
]
EXPECTED = {2: {ASPIRIN, BEES}, 3: {MEASLES, BEES}}  # query_id -> the texts used; query 1: none
QUERY_ID = {r["query"]: r["query_id"] for r in RECORDS}


def test_build_train_ranker_and_evaluate_read_the_same_labels(tmp_path):
    (tmp_path / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    records = [json.loads(line) for line in (tmp_path / "feedback.jsonl").read_text().splitlines()]
    used = UsedParams()  # params.yaml's
    every = 1.0  # every query held out, so evaluate reads them all

    splits, _, skipped = build_examples(records, BuildParams(val_fraction=every, shuffles=0), used)
    by_build = {}
    for ex in splits["val"]:
        shown = [c for c in records[ex["meta"]["query_id"] - 1]["candidates"] if c["used"] is not None]
        by_build[ex["meta"]["query_id"]] = {shown[i - 1]["text"] for i in ex["meta"]["selected"]}
    assert skipped == {"nothing used": 1}

    groups, changes = feedback_groups(records, RankerParams(), used, every)
    by_ranker = {QUERY_ID[g["query"]]: {g["texts"][i] for i in g["used"]} for g in groups["val"]}
    assert changes == {"uncited_quotes_used": 1, "thumbs_down_voided": 1}

    items = feedback_items(tmp_path, every, 0, used=used)
    by_eval = {int(it["qid"]): {c["text"] for c in it["candidates"] if c["id"] in it["relevant_ids"]} for it in items}

    assert by_build == by_ranker == by_eval == EXPECTED
