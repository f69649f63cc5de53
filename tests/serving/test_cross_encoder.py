"""The cross-encoder selector on a tiny model trained by the real `train_ce` stage on literal feedback."""

import json
import threading

import pytest

from retrieval.selection import PromptCandidate, fuse_scores, lexical_scores, parse_selection
from serving.cross_encoder import INPUT_FORMAT, CrossEncoderSelector, passage
from serving.selectors import SelectorLoadError

TOPICS = [("starch", "Amylase digests starch into sugars."), ("volcano", "Lava erupts from a volcano."),
          ("planet", "Jupiter is the largest planet."), ("river", "The Nile river flows north."),
          ("piano", "A piano has eighty-eight keys."), ("honey", "Bees make honey from nectar.")]  # fmt: skip
FILLERS = ["Cars have wheels.", "Snow is cold.", "Paris is in France.", "Glass is brittle."]


def query(word: str) -> str:
    return f"tell me about {word}"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from training.train_ce import CrossEncoderParams, train

    tmp = tmp_path_factory.mktemp("ce")
    rows = []
    for n, (word, text) in enumerate(TOPICS):
        cands = [(f, False) for f in FILLERS[:2]] + [(text, True)] + [(f, False) for f in FILLERS[2:]]
        rows.append({"query_id": n, "query": query(word), "threshold": None, "selector_version": "similarity",
                     "candidates": [{"rank": r, "chunk_id": r, "content_hash": "h", "score": 0.5, "source": "/d.md", "heading": None,
                                     "text": t, "pick_rank": None, "used": u} for r, (t, u) in enumerate(cands, start=1)]})  # fmt: skip
    (tmp / "fb").mkdir()
    (tmp / "fb" / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp}/mlflow.db")
        # the probe head is fitted on exactly these pairs; the fine-tune steps only exercise the loop
        train(CrossEncoderParams(feedback=str(tmp / "fb"), out=str(tmp / "out"), layers=2, max_length=32, probe_pairs=64,
                                 epochs=1.0, batch_size=8, learning_rate=1e-7, evals=2, patience=1), val_fraction=0.3)  # fmt: skip
    return tmp / "out"


@pytest.fixture(scope="module")
def selector(model_dir):
    return CrossEncoderSelector(model_dir, version="ce:test")


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
    lexical = lexical_scores("tell me about planets", [passage(c.heading, c.text) for c in cands])
    fused = fuse_scores(scores, selector.fusion, lexical)
    picked = json.loads(selector.answer("tell me about planets", cands, 5))["selected"]
    assert selector.fusion is not None and picked == sorted(range(1, 13), key=lambda i: -fused[i - 1])[:5]
    # a steep prior turns the answer into the retrieval order; without a fusion the scores alone rank
    monkeypatch.setattr(selector, "fusion", {"ce_weight": 0.0, "rank_bias": [-float(i) for i in range(20)]})
    assert json.loads(selector.answer("tell me about planets", cands, 5))["selected"] == [1, 2, 3, 4, 5]
    monkeypatch.setattr(selector, "fusion", None)
    assert json.loads(selector.answer("tell me about planets", cands, 5))["selected"] == sorted(range(1, 13), key=lambda i: -scores[i - 1])[:5]
    assert selector.answer("q", [], 5) == '{"selected": []}'


def test_trained_model_scores_the_relevant_passage_highest(selector):
    from training.ce_data import split_of3
    from training.train_ce import CrossEncoderParams

    trained = [(w, t) for w, t in TOPICS if split_of3(query(w), 0.3, CrossEncoderParams.calibration_fraction) == "train"]
    assert len(trained) >= 3
    for word, text in trained:  # last in retrieval order, so the model alone must lift it (the answer adds the order's prior)
        scores = selector.scores(query(word), [PromptCandidate("/d.md", None, t) for t in FILLERS] + [PromptCandidate("/d.md", None, text)])
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


def test_input_format_is_the_one_training_renders(model_dir):
    from training import train_ce

    assert INPUT_FORMAT == train_ce.INPUT_FORMAT == json.loads((model_dir / "ce_config.json").read_text())["input_format"]
    for heading, text in (("Title", "body"), (None, "body"), ("", "body")):
        assert passage(heading, text) == train_ce.passage(heading, text)


def test_refuses_a_folder_without_a_finished_run(tmp_path, model_dir):
    with pytest.raises(SelectorLoadError, match="not a trained cross-encoder"):
        CrossEncoderSelector(tmp_path, version="x")
    (tmp_path / "ce_config.json").write_text(json.dumps({"input_format": "ce-input/0", "max_length": 32}))
    with pytest.raises(SelectorLoadError, match="input format"):
        CrossEncoderSelector(tmp_path, version="x")
