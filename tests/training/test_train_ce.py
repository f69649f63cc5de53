"""Stage `train_ce`: pairs from literal feedback records, the probe head, and a tiny real training run."""

import json

import pytest
import torch

from eval.promotion import has_model
from retrieval.logs.feedback import split_of
from training.ce_data import build_pairs, rankings, split_of3
from training.ce_model import fit_head
from training.train_ce import CrossEncoderParams, main, train


def record(qid, query, cands, threshold=0.2):
    """A pulled feedback record; `cands` = (text, used[, score[, heading]]) in rank order."""
    rows = []
    for rank, (text, used, *rest) in enumerate(cands, start=1):
        score, heading = (rest + [0.5, None][len(rest) :])[:2]
        rows.append(
            {
                "rank": rank,
                "chunk_id": qid * 100 + rank,
                "content_hash": "h",
                "score": score,
                "source": f"/d/{rank}.md",
                "heading": heading,
                "text": text,
                "pick_rank": None,
                "used": used,
            }
        )
    return {
        "query_id": qid,
        "query": query,
        "threshold": threshold,
        "selector_version": "similarity",
        "candidates": rows,
    }


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


def test_hard_negatives_kept_then_filled_up_to_the_cap():
    pairs, stats = build_pairs([record(1, "Which enzyme digests starch?", STARCH)], 0.15, max_negatives_per_query=4)
    got = pairs["train"] + pairs["val"]
    assert [(p["text"], p["label"]) for p in got[:5]] == [
        ("Amylase digests starch into sugars.", 1),
        ("Digestion\nSalivary amylase starts starch digestion.", 1),  # heading prefixed
        ("Bananas are yellow.", 0),
        ("Cars have wheels.", 0),
        ("Paris is in France.", 0),  # every ignored one ranked above a used one
    ]
    assert len(got) == 6 and got[5]["text"] in (
        "Snow is cold.",
        "Rivers flow downhill.",
    )  # one filler up to the cap of 4
    assert stats["hard_negatives"] == 3 and stats["skipped"] == {}  # below the threshold: never shown, never a pair
    # hard negatives beyond the cap are all kept; 0 = every ignored candidate
    assert len(sum(build_pairs([record(1, "q", STARCH)], 0.15, 1)[0].values(), [])) == 5
    assert len(sum(build_pairs([record(1, "q", STARCH)], 0.15, 0)[0].values(), [])) == 7


def test_queries_without_positive_or_negative_skipped_and_counted_duplicates_removed():
    records = [
        record(1, "Which enzyme digests starch?", STARCH),
        record(2, "nothing used here", [("a", False), ("b", False)]),
        record(3, "everything used", [("a", True), ("b", True)]),
        record(4, "never labelled", [("a", None), ("b", None)]),
        record(
            5, "  which enzyme digests   STARCH? ", STARCH[:5]
        ),  # the same query replayed: its 5 pairs are all known
        record(6, "one text gone", [("x", True), (None, False), ("y", None), ("z", False)]),
    ]
    pairs, stats = build_pairs(
        records, 0.15, max_negatives_per_query=4, pair_tokens=lambda q, t: len(f"{q} {t}".split()), max_length=6
    )
    assert stats["skipped"] == {
        "query without a used candidate": 1,
        "query without an ignored candidate": 1,
        "query without used/ignored labels": 1,
        "duplicate pair": 5,
        "candidate text changed or deleted": 1,
        "candidate without used/ignored label": 1,
    }
    texts = [(p["query"], p["text"]) for p in pairs["train"] + pairs["val"]]
    assert len(texts) == len(set(texts)) == 6 + 2
    assert stats["train_pairs"] + stats["val_pairs"] == 8
    # "Which enzyme digests starch? Amylase digests starch into sugars." is 9 words > 6; "one text gone x" is 4
    assert stats["truncated_pairs"] == 6


def test_split_is_by_query_and_matches_the_build_stage():
    queries = [f"question number {i} about starch" for i in range(12)]
    records = [record(i, q, STARCH) for i, q in enumerate(queries)]
    pairs, _ = build_pairs(records, 0.5, max_negatives_per_query=4)
    for split in ("train", "val"):
        assert {p["query"] for p in pairs[split]} == {q for q in queries if split_of(q, 0.5) == split}
    assert pairs["train"] and pairs["val"]  # 12 queries at 0.5: both sides hold some
    groups = rankings(records, "val", 0.5)
    assert [g["query"] for g in groups] == [q for q in queries if split_of(q, 0.5) == "val"]
    assert groups[0]["used"] == [2, 4] and len(groups[0]["texts"]) == 7  # every shown candidate, retrieval order


def test_calibration_band_is_held_out_of_training_and_leaves_val_alone():
    queries = [f"question number {i} about starch" for i in range(40)]
    records = [record(i, q, STARCH) for i, q in enumerate(queries)]
    pairs, stats = build_pairs(records, 0.2, max_negatives_per_query=4, calibration_fraction=0.3)
    by_split = {split: {p["query"] for p in pairs[split]} for split in ("train", "val", "calibration")}
    assert by_split["val"] == {q for q in queries if split_of(q, 0.2) == "val"}  # the build stage's val, unchanged
    assert by_split["calibration"] and by_split["train"] and not by_split["calibration"] & by_split["train"]
    assert by_split["calibration"] == {q for q in queries if split_of3(q, 0.2, 0.3) == "calibration"}
    assert stats["calibration_pairs"] == len(pairs["calibration"])
    assert [g["query"] for g in rankings(records, "calibration", 0.2, 0.3)] == [
        q for q in queries if q in by_split["calibration"]
    ]
    assert build_pairs(records, 0.2, 4)[0]["calibration"] == []  # no band asked for: none held out


def test_probe_head_separates_what_it_can():
    x = torch.tensor([[0.10, 5.0], [0.12, 5.0], [0.30, 5.0], [0.31, 5.0], [0.33, 5.0], [0.29, 5.0]])
    weight, bias = fit_head(x, torch.tensor([0, 0, 1, 1, 1, 1]))
    logits = x @ weight.T + bias
    assert weight.shape == (1, 2) and (logits[:2] < 0).all() and (logits[2:] > 0).all()


def test_params_problems_reported_together():
    assert CrossEncoderParams().problems() == []
    bad = CrossEncoderParams(layers=7, probe_pairs=1, evals=0, max_length=8).problems()
    assert len(bad) == 4


@pytest.fixture
def feedback(tmp_path):
    topics = [
        ("starch", "Amylase digests starch into sugars."),
        ("volcano", "Lava erupts from a volcano."),
        ("planet", "Jupiter is the largest planet."),
        ("river", "The Nile river flows north."),
        ("piano", "A piano has eighty-eight keys."),
        ("honey", "Bees make honey from nectar."),
    ]
    fillers = ["Cars have wheels.", "Snow is cold.", "Paris is in France.", "Glass is brittle."]
    records = [
        record(
            n,
            f"question {n}: tell me about {word}",
            [(f, False) for f in fillers[:2]] + [(text, True)] + [(f, False) for f in fillers[2:]],
        )
        for n, (word, text) in enumerate(topics * 2)
    ]
    (tmp_path / "fb").mkdir()
    (tmp_path / "fb" / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path / "fb"


def test_tiny_training_run_saves_a_loadable_model(tmp_path, feedback, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    p = CrossEncoderParams(
        feedback=str(feedback),
        out=str(tmp_path / "ce"),
        layers=1,
        max_length=48,
        probe_pairs=64,
        epochs=1.0,
        batch_size=8,
        evals=2,
        patience=1,
    )
    m = train(p, val_fraction=0.5)
    assert m["train_pairs"] + m["val_pairs"] + m["calibration_pairs"] == 12 * 5 and m["skipped"] == {}
    assert (
        m["val_queries"] > 0 and 0 <= m["val_recall@5"] <= 1 and m["val_recall@5_similarity"] == 1.0
    )  # 5 shown: all in the top 5
    cfg = json.loads((tmp_path / "ce" / "ce_config.json").read_text())
    assert cfg["input_format"] == "ce-input/2" and cfg["layers"] == 1 and len(cfg["dataset_sha256"]) == 64
    assert cfg["val_curve"][0]["step"] == 0 and cfg["best_step"] == m["best_step"]
    assert m["calibration_queries"] > 0 and cfg["fusion"]["ce_weight"] >= 0 and len(cfg["fusion"]["rank_bias"]) == 20
    assert set(json.loads((tmp_path / "ce" / "metrics.json").read_text())) >= {
        "val_recall@5",
        "val_recall@5_similarity",
        "train_seconds",
    }
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(tmp_path / "ce" / "model"))
    assert model.max_length == 48 and model.predict([("q", "a"), ("q", "b")]).shape == (2,)
    assert has_model("cross_encoder", tmp_path / "ce")
    # the stage turned off (train_ce.enabled: false): the old model goes, a disabled record stays, evaluate skips it
    params = tmp_path / "params.yaml"
    params.write_text(f"train_ce:\n  enabled: false\n  out: {tmp_path / 'ce'}\n")
    main(str(params))
    assert not has_model("cross_encoder", tmp_path / "ce")
    assert [f.name for f in (tmp_path / "ce" / "model").iterdir()] == ["DISABLED"]
    assert json.loads((tmp_path / "ce" / "metrics.json").read_text()) == {"enabled": False}
    import mlflow

    run = mlflow.get_run(cfg["mlflow_run_id"])
    assert run.data.params["layers"] == "1"
    assert [h.step for h in mlflow.MlflowClient().get_metric_history(run.info.run_id, "val_recall_at_5")][0] == 0
