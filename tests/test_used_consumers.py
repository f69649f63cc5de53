"""One definition of used: build's examples, train_ranker's rankings and evaluate's held-out feedback read the
same labels from the same pulled log (`retrieval.logs.used.used_labels`, params.yaml `used`)."""

import json

from eval.items import feedback_items
from retrieval.params import UsedParams
from tests.feedback_records import candidate, record
from training.build import BuildParams, build_examples
from training.feedback_rankings import feedback_groups
from training.train_ranker import RankerParams

ASPIRIN = "Aspirin lowers fever in adults within two hours of a single dose."
BEES = "Bees communicate the distance of flowers through a waggle dance."
PARIS = "Paris is the capital of France and its largest city."
MEASLES = "Vaccines prevent measles outbreaks in children, a review found."


RECORDS = [
    # rated -1: its context's citation is voided, nothing is used
    record(
        [candidate(1, True, text=ASPIRIN), candidate(2, False, text=PARIS)],
        "does aspirin lower fever",
        1,
        answer="Aspirin lowers fever in adults [1].",
        rating=-1,
    ),
    # chunk 2 quoted near-verbatim without its [2]: used beside the cited chunk 1
    record(
        [candidate(1, True, text=ASPIRIN), candidate(2, False, text=BEES), candidate(3, False, text=PARIS)],
        "aspirin and bees",
        2,
        answer=f"Aspirin lowers fever in adults within two hours [1]. {BEES}",
    ),
    # chunk 3 cited outside the context (a judge's label, shown False): its label stands
    record(
        [candidate(1, True, text=MEASLES), candidate(2, False, text=PARIS), candidate(3, True, False, text=BEES)],
        "do vaccines prevent measles",
        3,
        answer="Vaccines prevent measles outbreaks in children [1].",
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

    rp = RankerParams()  # params.yaml's
    groups, changes = feedback_groups(records, used, every, rp.calibration_fraction, rp.ipw_clip)
    by_ranker = {QUERY_ID[g["query"]]: {g["texts"][i] for i in g["used"]} for g in groups["val"]}
    assert changes == {"uncited_quotes_used": 1, "thumbs_down_voided": 1}

    items = feedback_items(tmp_path, every, 0, used=used)
    by_eval = {int(it["qid"]): {c["text"] for c in it["candidates"] if c["id"] in it["relevant_ids"]} for it in items}

    assert by_build == by_ranker == by_eval == EXPECTED
