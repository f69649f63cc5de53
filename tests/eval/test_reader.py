"""Answer quality by a reader (eval/reader.py): SQuAD's EM and token F1, and the packaged SmolLM2-135M-Instruct
answering a small real HotpotQA sample from each system's context beside its gold-evidence ceiling; the gate's
answer-quality guard."""

import json
from pathlib import Path

import pytest

from eval.gate import DeployParams, gate
from eval.reader import ReaderError, answer_quality, exact_match, make_reader, normalize, token_f1
from retrieval.contracts.selection import Pick

from .test_deploy import result, row

REPO = Path(__file__).resolve().parents[2]


def test_exact_match_and_f1_follow_squads_normalisation():
    assert normalize("The  Eiffel-Tower!") == "eiffeltower" and normalize("an apple, a day") == "apple day"
    assert exact_match("the Beatles.", ["Beatles"]) == 1.0 and exact_match("Beatles band", ["Beatles"]) == 0.0
    assert token_f1("Beatles band", ["The Beatles"]) == pytest.approx(2 / 3)
    assert token_f1("", ["x"]) == 0.0 and token_f1("x y", ["z", "y x"]) == 1.0  # the best gold answer counts
    assert token_f1("\x00" * 10_000, ["yes"]) == 0.0  # NUL and huge answers: no crash, no credit


def test_a_missing_or_corrupt_reader_gguf_is_one_line(tmp_path):
    with pytest.raises(ReaderError, match="not found"):
        make_reader(str(tmp_path / "nope.gguf"))
    bad = tmp_path / "reader.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 100)
    with pytest.raises(ReaderError) as e:
        make_reader(str(bad))
    assert "\n" not in str(e.value)


def test_the_packaged_reader_answers_a_real_sample_and_its_ceiling_is_reported():
    with open(REPO / "data" / "judged" / "hotpotqa" / "test.jsonl") as f:
        items = [json.loads(next(f)) for _ in range(4)]
    gold = {it["qid"]: Pick(tuple(it["relevant_ids"])) for it in items}
    none_gold = {
        it["qid"]: Pick(tuple(c["id"] for c in it["candidates"] if c["id"] not in it["relevant_ids"])[:2])
        for it in items
    }
    reader = make_reader("")
    try:
        a = answer_quality(items, {"general": gold, "distractors": none_gold}, reader, n=4)
    finally:
        reader.close()
    assert a["reader"].startswith("llamacpp:SmolLM2") and a["queries"] == 4
    assert set(a["systems"]) == {"general", "distractors", "ceiling"}
    # the same context is read once: general's picks are the gold evidence, the ceiling's too
    assert a["contexts_read"] == 8 and a["systems"]["general"] == a["systems"]["ceiling"]
    for row_ in a["systems"].values():
        assert 0 <= row_["em"] <= row_["f1"] <= 1
    assert "distractors_vs_general" in a["paired_f1"] and "general_vs_ceiling" not in a["paired_f1"]


def test_a_cached_reader_answers_again_from_its_cache_and_shows_progress(tmp_path):
    """With a cache folder, a second reader (a later run or cycle) reads each answer back without asking the model,
    the same text; a context it has not seen is asked; a line cut short by a crash is asked again."""
    with open(REPO / "data" / "judged" / "hotpotqa" / "test.jsonl") as f:
        items = [json.loads(next(f)) for _ in range(2)]
    gold = {it["qid"]: Pick(tuple(it["relevant_ids"])) for it in items}
    ticks: list[int] = []
    first = make_reader("", cache_dir=tmp_path)
    try:
        a = answer_quality(items, {"general": gold}, first, n=2, progress=lambda n: lambda: ticks.append(n))
    finally:
        first.close()
    assert first.cache.misses == 2 and first.cache.hits == 0 and ticks == [4] * 4  # 2 systems x 2 questions
    second = make_reader("", cache_dir=tmp_path)
    second._llm.close()
    second._llm = None  # a model that is never asked: every answer must come from the cache
    b = answer_quality(items, {"general": gold}, second, n=2)
    assert second.cache.hits == 2 and second.cache.misses == 0 and b["systems"] == a["systems"]
    path = second.cache.path
    path.write_text(path.read_text() + '{"key": "ab')  # cut short
    third = make_reader("", cache_dir=tmp_path)
    try:
        other = {it["qid"]: Pick(tuple(c["id"] for c in it["candidates"][:1])) for it in items}
        answer_quality(items, {"first": other}, third, n=2)
    finally:
        third.close()
    assert len(third.cache.answers) >= 2 and third.cache.misses >= 1  # its own contexts were asked


def answers(diff, lo, hi):
    return {"paired_f1": {"selector_vs_hybrid": {"f1_diff": diff, "ci95_low": lo, "ci95_high": hi}}}


def test_the_gate_reads_the_answer_quality_guard():
    p = DeployParams(in_domain="a", in_domain_guard="", out_of_domain="", margin=0.03, answer_f1_tolerance=0.05)
    good = result(row(0.80), (0.03, 0.13))
    assert gate({"a": good}, p).passed  # no reader figures: nothing to guard
    assert gate({"a": {**good, "answers": answers(-0.04, -0.09, -0.01)}}, p).passed  # within the tolerance
    assert gate({"a": {**good, "answers": answers(-0.10, -0.20, 0.01)}}, p).passed  # CI spans 0: not surely worse
    d = gate({"a": {**good, "answers": answers(-0.10, -0.18, -0.02)}}, p)
    assert not d.passed and d.reasons == [
        "a: answer F1 -0.1000 vs hybrid (95% CI [-0.1800, -0.0200]) loses more than 0.05"
    ]
    assert d.details["a"]["answer_f1"]["f1_diff"] == -0.10
