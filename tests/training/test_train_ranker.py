"""Stage `train_ranker` on real data: HotpotQA train questions as a feedback log (used = the gold
paragraphs), the adapter and fusion fitted, and the written folder served as a selector."""

import json

import numpy as np
import pytest

from eval.promotion import folder_record
from retrieval.selection import PromptCandidate, parse_selection
from serving.selectors import from_record
from training import train_ranker
from training.train_ranker import RankerParams, fit_adapter, train


def feedback_from_hotpotqa(path, n):
    """Pulled feedback records (the pull stage's shape) from contract-5 items: the candidates in file order."""
    records = []
    for qid, line in enumerate(open(path, encoding="utf-8")):
        if qid >= n:
            break
        it = json.loads(line)
        rel = set(it["relevant_ids"])
        cands = [
            {
                "rank": r,
                "chunk_id": qid * 100 + r,
                "content_hash": "h",
                "score": 0.5,
                "source": f"hotpotqa#{c['id']}",
                "heading": c["title"],
                "text": c["text"],
                "pick_rank": None,
                "used": c["id"] in rel,
            }
            for r, c in enumerate(it["candidates"], start=1)
        ]
        records.append(
            {
                "query_id": qid,
                "query": it["query"],
                "threshold": 0.2,
                "selector_version": "similarity",
                "candidates": cands,
            }
        )
    return records


@pytest.fixture(scope="module")
def trained(benchmark_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranker")
    (tmp / "fb").mkdir()
    records = feedback_from_hotpotqa(benchmark_dir / "hotpotqa" / "train.jsonl", 200)
    (tmp / "fb" / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    p = RankerParams(feedback=str(tmp / "fb"), out=str(tmp / "ranker"), calibration_fraction=0.3)
    w, record, m = train(p, val_fraction=0.2)
    return tmp, p, w, record, m


def test_the_ranker_learns_what_the_first_stage_order_misses(trained):
    _, _, w, record, m = trained
    assert m["train_queries"] > 50 and m["calibration_queries"] > 30 and m["val_queries"] > 20
    assert w.shape == (384, 384) and m["adapter_norm"] > 0  # the adapter moved off the base model
    # the candidates come in file order, so the retrieval order knows nothing: the ranker learned to weigh the evidence
    assert m["val_recall@5"] > m["val_recall@5_retrieval_order"] + 0.1
    assert (
        abs(record["weights"]["prior"]) < 0.5 and record["weights"]["bm25"] > 0
    )  # HotpotQA's answers share the question's words
    assert record["input_format"] == "ranker-input/1" and len(record["dataset_sha256"]) == 64


def test_no_steps_no_adapter():
    g = [{"q": np.eye(4, dtype=np.float32)[0], "P": np.eye(4, dtype=np.float32), "texts": list("abcd"), "used": [2]}]
    assert not fit_adapter(g, RankerParams(adapter_steps=0)).any()


def test_the_written_folder_is_served_as_trained(trained, monkeypatch):
    tmp, p, w, record, m = trained
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp}/mlflow.db")
    (tmp / "params.yaml").write_text(
        f"build: {{val_fraction: 0.2}}\ntrain_ranker: {{feedback: {p.feedback}, out: {p.out}, calibration_fraction: 0.3}}\n"
    )
    train_ranker.main(str(tmp / "params.yaml"))
    out = tmp / "ranker"
    cfg = json.loads((out / "ranker_config.json").read_text())
    assert cfg["weights"] == record["weights"] and np.allclose(np.load(out / "adapter.npy"), w)
    assert json.loads((out / "metrics.json").read_text())["val_recall@5"] == m["val_recall@5"]
    selector = from_record(folder_record("ranker", out))
    assert selector.version.startswith("ranker:")
    cands = [
        PromptCandidate("a.md", None, "Snow is cold."),
        PromptCandidate("b.md", "Enzymes", "Amylase digests starch."),
        PromptCandidate("c.md", None, "Paris is in France."),
    ]
    sel = parse_selection(selector.answer("Which enzyme digests starch?", cands, 2), 3, 2)
    assert sel.status == "ok" and sel.selected[0] == 2
    assert parse_selection(selector.answer("q", [], 5), 0, 5).selected == ()


def test_params_problems_reported_together():
    assert RankerParams().problems() == []
    assert len(RankerParams(adapter_l2=-1, k=0, temperature=0).problems()) == 2


def test_a_broken_folder_is_refused_with_a_load_error(tmp_path):
    from serving.interface import SelectorLoadError
    from serving.ranker import RankerSelector

    with pytest.raises(SelectorLoadError, match="not a trained ranker folder"):
        RankerSelector(tmp_path, "ranker:x")
    np.save(tmp_path / "adapter.npy", np.zeros((3, 3), dtype=np.float32))
    (tmp_path / "ranker_config.json").write_text(
        json.dumps({"input_format": "ranker-input/1", "weights": {"bm25": 1.0}})
    )
    with pytest.raises(SelectorLoadError, match="shape"):
        RankerSelector(tmp_path, "ranker:x")
    (tmp_path / "ranker_config.json").write_text(json.dumps({"input_format": "other/9"}))
    with pytest.raises(SelectorLoadError, match="input format"):
        RankerSelector(tmp_path, "ranker:x")
