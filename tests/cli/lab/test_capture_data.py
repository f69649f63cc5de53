"""The generated part of the capture labelled set: benchmark passages wrapped as answers (durable), and chatter
from templates (noise), the held-out chatter in words the stream's never uses."""

import random

from cli.lab.capture_data import FILES, OBJECTS, durable, noise


def test_durable_answers_are_real_benchmark_passages(benchmark_dir):
    rows = durable(benchmark_dir, random.Random(0), n_scifact=3, n_hotpot=2)
    assert [r["id"].split("-")[0] for r in rows] == ["scifact"] * 3 + ["hotpotqa"] * 2
    assert {r["label"] for r in rows} == {"durable"} and len({r["id"] for r in rows}) == 5
    assert all(len(r["assistant"]) >= 150 and r["user"].strip() for r in rows)
    assert rows == durable(benchmark_dir, random.Random(0), n_scifact=3, n_hotpot=2)  # seeded: the same set


def test_noise_is_distinct_chatter_and_the_held_out_part_uses_other_words():
    stream, held_out = noise(random.Random(1), 60, held_out=False), noise(random.Random(1), 60, held_out=True)
    for rows, name in ((stream, "stream"), (held_out, "eval")):
        assert [r["id"] for r in rows] == [f"noise-{name}-{i}" for i in range(1, 61)]
        assert {r["label"] for r in rows} == {"noise"} and len({r["assistant"] for r in rows}) == 60
    stream_words = OBJECTS[False] + FILES[False]
    assert not any(w in r["assistant"] for r in held_out for w in stream_words)
    assert any(w in r["assistant"] for r in stream for w in stream_words)
