"""The feedback log's rankings (training/feedback_rankings.py): split by query as the build stage splits, a
calibration band held out of train, and the Recall@k they report."""

from retrieval.contracts.metrics import recall_at_k
from retrieval.logs.feedback_records import split_of
from tests.feedback_records import candidate, record
from training.feedback_rankings import mean_recall, rankings, split_of3


def labelled_record(qid, query, cands, threshold=0.2):
    """A pulled feedback record; `cands` = (text, used[, score[, heading]]) in rank order."""
    rows = []
    for rank, (text, used, *rest) in enumerate(cands, start=1):
        score, heading = (rest + [0.5, None][len(rest) :])[:2]
        rows.append(
            candidate(rank, used, None, None, text=text, score=score, heading=heading, chunk_id=qid * 100 + rank)
        )
    return record(rows, query, qid, threshold=threshold)


STARCH = [
    ("Bananas are yellow.", False),
    ("Cars have wheels.", False),
    ("Amylase digests starch into sugars.", True),
    ("Paris is in France.", False),
    ("Salivary amylase starts starch digestion.", True, 0.5, "Digestion"),
    ("Snow is cold.", False),
    ("Rivers flow downhill.", False),
    ("Below the threshold.", True, 0.1),
]


def test_recall_at_k():
    assert recall_at_k({0, 3}, [3, 1, 2], 2) == 0.5 and recall_at_k(set(), [0], 5) == 0.0
    groups = [{"query": "q", "texts": ["a", "b", "c"], "used": [2]}, {"query": "r", "texts": ["a", "b"], "used": [0]}]
    assert mean_recall(groups, None, 1) == 0.5  # retrieval order: the second query's first candidate is right
    assert mean_recall(groups, [[0.0, 0.1, 0.9], [0.5, 0.2]], 1) == 1.0


def test_split_is_by_query_and_matches_the_build_stage():
    queries = [f"question number {i} about starch" for i in range(12)]
    records = [labelled_record(i, q, STARCH) for i, q in enumerate(queries)]
    for split in ("train", "val"):
        assert [g["query"] for g in rankings(records, split, 0.5)] == [q for q in queries if split_of(q, 0.5) == split]
    groups = rankings(records, "val", 0.5)
    assert groups and len(groups) < len(queries)  # 12 queries at 0.5: both sides hold some
    assert groups[0]["used"] == [2, 4] and len(groups[0]["texts"]) == 7  # every shown candidate, retrieval order
    assert groups[0]["texts"][4] == "Digestion\nSalivary amylase starts starch digestion."  # heading prefixed


def test_calibration_band_is_held_out_of_train_and_leaves_val_alone():
    queries = [f"question number {i} about starch" for i in range(40)]
    records = [labelled_record(i, q, STARCH) for i, q in enumerate(queries)]
    by_split = {s: [g["query"] for g in rankings(records, s, 0.2, 0.3)] for s in ("train", "val", "calibration")}
    assert by_split["val"] == [q for q in queries if split_of(q, 0.2) == "val"]  # the build stage's val, unchanged
    assert by_split["calibration"] and by_split["train"] and not set(by_split["calibration"]) & set(by_split["train"])
    assert by_split["calibration"] == [q for q in queries if split_of3(q, 0.2, 0.3) == "calibration"]
    assert sorted(sum(by_split.values(), [])) == sorted(queries)
    assert rankings(records, "calibration", 0.2) == []  # no band asked for: none held out
