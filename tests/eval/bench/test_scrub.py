"""The secret scrubber measured (`pai lab bench scrub`): its false positives on real prose (SciFact's abstracts) and
on this repository's code, counted and low."""

from pathlib import Path

from eval.bench.scrub import measure

REPO = Path(__file__).resolve().parents[3]


def test_false_positives_on_real_prose_and_code_are_measured_and_low(benchmark_dir):
    m = measure(benchmark_dir / "scifact" / "corpus.jsonl", REPO)
    assert m["prose"]["documents"] > 5000 and m["code"]["files"] > 50
    assert m["prose"]["tokens_changed"] / m["prose"]["tokens"] <= 1e-4
    assert m["code"]["lines_changed"] / m["code"]["lines"] <= 2e-3


def test_the_mechanism_corpus_is_reported_by_source_and_mechanism():
    from eval.bench.scrub import mechanisms, summary

    m = mechanisms(REPO / "tests" / "data" / "provider_corpus.jsonl")
    assert set(m["by_mechanism"]) == {"copies", "assignments", "pairs", "prefixed", "context"}
    sources = {
        "written",
        "written-untuned",
        "written-57",
        "written-57-untuned",
        "gitleaks",
        "credsweeper",
        "classifinder",
    }
    assert sources <= set(m["by_source"])
    assert m["inputs"] > 1000 and m["fully_redacted"] >= 0.97 and m["negatives_changed"] == []
    issue57 = m["by_source"]["written-57"], m["by_source"]["written-57-untuned"]  # floors: tuned, held back
    assert issue57[0]["fully_redacted"] >= 0.98 and issue57[1]["fully_redacted"] >= 0.85, m["missed"]
    empty = {"documents_changed": 0, "documents": 1, "tokens_changed": 0, "tokens": 1, "examples": []}
    lines = summary(
        {"prose": empty, "code": {"lines_changed": 0, "lines": 1, "files": 1, "examples": []}, "mechanisms": m}
    )
    assert lines[0].startswith("mechanisms:") and any(line.strip().startswith("pairs:") for line in lines)
