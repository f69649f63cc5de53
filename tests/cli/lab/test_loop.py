"""The learning-loop report's pure parts on literal data (the full report is `pai lab loop report`)."""

import json

import numpy as np

from cli.lab.loop import scifact_records
from retrieval.contracts.metrics import mean_ci


def test_scifact_records_are_the_scifact_queries_oldest_first(tmp_path):
    recs = [
        {"query_id": 9, "candidates": [{"source": "/b/scifact/corpus.jsonl#1"}]},
        {"query_id": 3, "candidates": [{"source": "/b/hotpotqa/test.jsonl#x"}]},
        {"query_id": 5, "candidates": [{"source": "/b/hotpotqa/x"}, {"source": "/b/scifact/corpus.jsonl#2"}]},
    ]
    f = tmp_path / "feedback.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert [r["query_id"] for r in scifact_records(f)] == [5, 9]


def test_mean_ci_brackets_the_mean_and_collapses_on_constant_data():
    assert mean_ci(np.full(40, 0.7)) == (0.7, 0.7, 0.7)
    mean, lo, hi = mean_ci(np.array([0.0, 1.0] * 100))
    assert mean == 0.5 and 0.4 < lo < 0.5 < hi < 0.6
