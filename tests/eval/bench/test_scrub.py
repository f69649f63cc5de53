"""The secret scrubber measured (`pai bench scrub`): its false positives on real prose (SciFact's abstracts) and
on this repository's code, counted and low."""

from pathlib import Path

from eval.bench.scrub import measure

REPO = Path(__file__).resolve().parents[3]


def test_false_positives_on_real_prose_and_code_are_measured_and_low(benchmark_dir):
    m = measure(benchmark_dir / "scifact" / "corpus.jsonl", REPO)
    assert m["prose"]["documents"] > 5000 and m["code"]["files"] > 50
    assert m["prose"]["tokens_changed"] / m["prose"]["tokens"] <= 1e-4
    assert m["code"]["lines_changed"] / m["code"]["lines"] <= 2e-3
