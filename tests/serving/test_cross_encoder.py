"""The cross-encoder selector on a tiny model trained by the real `train_ce` stage on literal feedback
(tests/conftest.py: ce_model_dir)."""

import json
import shutil
import threading
from pathlib import Path

import pytest

from retrieval.contracts.ce_input import CE_INPUT_FORMAT, ce_passage
from retrieval.contracts.cpu_dtype import ce_dtype
from retrieval.contracts.learned_fusion import fuse_scores
from retrieval.contracts.lexical import lexical_scores
from retrieval.contracts.selection import PromptCandidate, parse_selection
from serving.cross_encoder import CrossEncoderSelector
from serving.interface import SelectorLoadError

# what the session's tiny cross-encoder (tests/conftest.py: ce_model_dir) is trained on
TINY_CE = json.loads((Path(__file__).resolve().parents[1] / "data" / "tiny_ce.json").read_text())
TOPICS = [tuple(t) for t in TINY_CE["topics"]]
FILLERS = TINY_CE["fillers"]


def query(word: str) -> str:
    return TINY_CE["query"].format(word)


@pytest.fixture(scope="module")
def selector(ce_model_dir):
    return CrossEncoderSelector(ce_model_dir, version="ce:test")


def candidates(n: int) -> list[PromptCandidate]:
    texts = [t for _, t in TOPICS] + FILLERS + [f"Filler passage number {i}." for i in range(20)]
    return [PromptCandidate(f"/d/{i}.md", "A heading" if i % 3 == 0 else None, texts[i]) for i in range(n)]


@pytest.mark.parametrize("n", range(1, 21))
def test_answer_is_contract_output_for_1_to_20_candidates(selector, n):
    for k in (1, 5, n + 3):  # k < n, k around n, k > n
        raw = selector.answer("tell me about honey", candidates(n), k)
        sel = parse_selection(raw, n, k)
        assert sel.status == "ok" and raw == json.dumps({"selected": list(sel.selected)})
        assert len(sel.selected) == min(k, n) and len(set(sel.selected)) == len(sel.selected)


def test_picks_follow_the_scores_fused_with_the_retrieval_order(selector, monkeypatch):
    cands = candidates(12)
    scores = selector.scores("tell me about planets", cands)
    lexical = lexical_scores("tell me about planets", [ce_passage(c.heading, c.text) for c in cands])
    fused = fuse_scores(scores, selector.fusion, lexical)
    picked = json.loads(selector.answer("tell me about planets", cands, 5))["selected"]
    assert selector.fusion is not None and picked == sorted(range(1, 13), key=lambda i: -fused[i - 1])[:5]
    # a steep prior turns the answer into the retrieval order; without a fusion the scores alone rank
    monkeypatch.setattr(selector, "fusion", {"ce_weight": 0.0, "rank_bias": [-float(i) for i in range(20)]})
    assert json.loads(selector.answer("tell me about planets", cands, 5))["selected"] == [1, 2, 3, 4, 5]
    monkeypatch.setattr(selector, "fusion", None)
    assert (
        json.loads(selector.answer("tell me about planets", cands, 5))["selected"]
        == sorted(range(1, 13), key=lambda i: -scores[i - 1])[:5]
    )
    assert selector.answer("q", [], 5) == '{"selected": []}'


def test_trained_model_scores_the_relevant_passage_highest(selector):
    from training.ce_data import split_of3
    from training.train_ce import CrossEncoderParams

    trained = [
        (w, t) for w, t in TOPICS if split_of3(query(w), 0.3, CrossEncoderParams.calibration_fraction) == "train"
    ]
    assert len(trained) >= 3
    for (
        word,
        text,
    ) in trained:  # last in retrieval order, so the model alone must lift it (the answer adds the order's prior)
        scores = selector.scores(
            query(word), [PromptCandidate("/d.md", None, t) for t in FILLERS] + [PromptCandidate("/d.md", None, text)]
        )
        assert max(range(5), key=scores.__getitem__) == 4, word


def test_concurrent_callers_get_the_sequential_answers(selector):
    asks = [(query(w), candidates(6 + i)) for i, (w, _) in enumerate(TOPICS)]
    want = [selector.answer(q, c, 5) for q, c in asks]
    got: dict[int, list[str]] = {}

    def worker(t: int) -> None:
        got[t] = [selector.answer(q, c, 5) for q, c in asks]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[t] == want for t in range(4))


def test_input_format_is_the_one_training_renders(ce_model_dir):
    assert json.loads((ce_model_dir / "ce_config.json").read_text())["input_format"] == CE_INPUT_FORMAT
    assert [ce_passage(h, "body") for h in ("Title", None, "")] == ["Title\nbody", "body", "body"]


def test_refuses_a_folder_without_a_finished_run(tmp_path, ce_model_dir):
    with pytest.raises(SelectorLoadError, match="not a trained cross-encoder"):
        CrossEncoderSelector(tmp_path, version="x")
    (tmp_path / "ce_config.json").write_text(json.dumps({"input_format": "ce-input/0", "max_length": 32}))
    with pytest.raises(SelectorLoadError, match="input format"):
        CrossEncoderSelector(tmp_path, version="x")


def test_bfloat16_serving_scores_as_float32_does(ce_model_dir):
    import torch

    f32, b16 = (
        CrossEncoderSelector(ce_model_dir, "f32", dtype="float32"),
        CrossEncoderSelector(ce_model_dir, "b16", dtype="bfloat16"),
    )
    assert next(f32.model.parameters()).dtype == torch.float32 and next(b16.model.parameters()).dtype == torch.bfloat16
    for word, _ in TOPICS:
        a, b = f32.scores(query(word), candidates(12)), b16.scores(query(word), candidates(12))
        spread = max(a) - min(a)
        assert spread > 0 and max(abs(x - y) for x, y in zip(a, b)) < 0.05 * spread + 0.02, word


def test_serves_in_the_folders_precision_and_refuses_an_unknown_one(tmp_path, ce_model_dir):
    folder = tmp_path / "ce"
    shutil.copytree(ce_model_dir, folder)
    cfg = json.loads((folder / "ce_config.json").read_text())
    assert cfg["serve_dtype"] == "auto"  # the stage writes its params' precision
    for stored, served in (("float32", "float32"), ("bfloat16", "bfloat16"), ("auto", ce_dtype("auto"))):
        (folder / "ce_config.json").write_text(json.dumps({**cfg, "serve_dtype": stored}))
        assert CrossEncoderSelector(folder, "x").dtype == served
    (folder / "ce_config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "serve_dtype"}))
    assert CrossEncoderSelector(folder, "x").dtype == "float32"  # folders from before the setting ran in float32
    (folder / "ce_config.json").write_text(json.dumps({**cfg, "serve_dtype": "int4"}))
    with pytest.raises(SelectorLoadError, match="int4"):
        CrossEncoderSelector(folder, "x")
