"""The embedder's backends side by side (`pai lab bench embed`): the backend list as typed, and a run whose first
row is the reference it is compared with (parity 1, no difference), on literal items and the real model."""

import pytest

from eval.bench.embed import parse_backends, run

ITEMS = [
    {
        "query": "how do bees make honey?",
        "relevant_ids": ["a"],
        "candidates": [
            {"id": "a", "title": "Bees", "text": "Honey bees turn nectar into honey in wax combs."},
            {"id": "b", "text": "Rivers carry water to the sea."},
            {"id": "c", "text": "A compiler emits machine code."},
        ],
    },
    {
        "query": "what does a compiler produce?",
        "relevant_ids": ["c"],
        "candidates": [
            {"id": "a", "title": "Bees", "text": "Honey bees turn nectar into honey in wax combs."},
            {"id": "c", "text": "A compiler emits machine code."},
        ],
    },
]


def test_backends_are_parsed_in_order_each_once():
    assert parse_backends("torch:f32, openvino:auto") == [("torch", "f32"), ("openvino", "auto")]
    assert parse_backends("torch") == [("torch", "auto")]  # a backend alone: precision auto
    with pytest.raises(ValueError, match="each once"):
        parse_backends("torch,torch:auto")


def test_the_first_backend_is_the_reference_of_the_run():
    ticks = []
    r = run(ITEMS, [("torch", "f32")], batch_size=4, k=1, progress=lambda: ticks.append(1))
    assert (r["queries"], r["passages"], r["batch_size"], len(ticks)) == (2, 3, 4, 1)
    (row,) = r["rows"]
    assert (row["backend"], row["precision"], row["recall@1"], row["speedup"], row["diff"]) == (
        "torch",
        "f32",
        1.0,
        1.0,
        0.0,
    )
    assert row["cos_min"] == pytest.approx(1.0, abs=1e-5) and row["passages_per_s"] > 0
