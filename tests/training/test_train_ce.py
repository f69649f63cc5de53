"""Stage `train_ce`: pairs from literal feedback records, the probe head, and a tiny real training run."""

import json

import pytest
import torch

from eval.promotion import has_model
from retrieval.feedback import split_of
from retrieval.learned_fusion import fuse_scores
from retrieval.lexical import lexical_scores
from retrieval.metrics import recall_at_k
from training.ce_data import build_pairs, fit_fusion, fused_recall, mean_recall, rankings, split_of3
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


def groups_with(used_at: list[int], n: int = 6) -> list[dict]:
    return [{"query": f"q{i}", "texts": [f"t{j}" for j in range(n)], "used": [u]} for i, u in enumerate(used_at)]


def test_fusion_trusts_an_informative_model_and_ignores_a_useless_one():
    rng = torch.Generator().manual_seed(0)
    # the consumer uses position 0 half the time, else a late one that the model scores highest
    used_at = [0 if i % 2 else 3 + i % 3 for i in range(60)]
    groups = groups_with(used_at)
    informative = [
        [2.0 if j == g["used"][0] else float(torch.randn(1, generator=rng)) * 0.3 for j in range(6)] for g in groups
    ]
    fusion = fit_fusion(groups, informative, positions=4, lexical=False)
    assert fusion["ce_weight"] > 0 and len(fusion["rank_bias"]) == 4
    assert fused_recall(groups, informative, fusion, 1) > mean_recall(groups, None, 1) == 0.5
    # a model whose scores are noise: the fitted fusion keeps (about) the retrieval order's top pick
    always_first = groups_with([0] * 40)
    noise = [[float(x) for x in torch.randn(6, generator=rng)] for _ in always_first]
    useless = fit_fusion(always_first, noise, positions=4, lexical=False)
    assert fused_recall(always_first, noise, useless, 1) == mean_recall(always_first, None, 1) == 1.0
    assert useless["rank_bias"][0] > useless["rank_bias"][1]


def test_fuse_scores_applies_the_prior_by_position_and_bm25():
    fusion = {"ce_weight": 2.0, "rank_bias": [1.0, 0.5]}
    assert fuse_scores([0.1, 0.2, 0.3], fusion) == pytest.approx(
        [1.2, 0.9, 1.1]
    )  # positions past the last share its bias
    assert fuse_scores([0.1, 0.2], None) == [0.1, 0.2]
    with_bm25 = {**fusion, "bm25_weight": 0.5}
    assert fuse_scores([0.1, 0.2, 0.3], with_bm25, [1.0, 0.0, -1.0]) == pytest.approx([1.7, 0.9, 0.6])
    with pytest.raises(ValueError, match="lexical"):
        fuse_scores([0.1], with_bm25)


def test_lexical_scores_are_bm25_standardised_within_the_candidates():
    lex = lexical_scores(
        "amylase starch", ["Amylase digests starch.", "Cars have wheels.", "Starch is a sugar chain.", "Snow."]
    )
    assert lex[0] > lex[2] > lex[1] == lex[3] and sum(lex) == pytest.approx(0.0, abs=1e-9)
    assert lexical_scores("zebra", ["a b", "c d"]) == [0.0, 0.0] and lexical_scores("q", []) == []


def test_lexical_scores_equal_bm25s_on_real_candidates(benchmark_dir):
    """The direct BM25 gives bm25s's scores (standardised the same way) on real 20-candidate sets and edge cases."""
    import bm25s
    import numpy as np

    from eval.bench.ce import hotpotqa_sets, scifact_sets
    from retrieval.ce_input import ce_passage

    def reference(query: str, texts: list[str]) -> list[float]:
        retriever = bm25s.BM25()
        words = bm25s.tokenize(query, show_progress=False, return_ids=False)[0]
        try:
            with np.errstate(invalid="ignore", divide="ignore"):
                retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
                raw = (
                    np.nan_to_num(np.asarray(retriever.get_scores(words), dtype=np.float64))
                    if words
                    else np.zeros(len(texts))
                )
        except ValueError:  # bm25s refuses an empty vocabulary
            raw = np.zeros(len(texts))
        return [0.0] * len(texts) if raw.std() < 1e-9 else list((raw - raw.mean()) / raw.std())

    sets = [
        (q, [ce_passage(c.heading, c.text) for c in cs])
        for q, cs in scifact_sets(benchmark_dir / "scifact", 25)
        + hotpotqa_sets(benchmark_dir / "hotpotqa" / "test.jsonl", 25)
    ]
    sets += [
        ("the of and", ["the of", "a b"]),
        ("cell cell cells", ["cell", "cells cell", "x"]),
        ("x", ["", ""]),
        ("", ["ab cd", "ef gh"]),
        ("ab", ["ab ab", "ab"]),
        ("Émile's DNA-repair", ["émile dna repair", "DNA", "repair repair"]),
    ]
    for query, texts in sets:
        assert lexical_scores(query, texts) == pytest.approx(reference(query, texts), abs=1e-5), query


def test_fusion_weighs_bm25_when_the_used_passage_shares_the_query_words():
    words = ["amylase", "glacier", "violin", "copper", "tundra", "saffron", "pylon", "quartz"]
    groups = [
        {"query": f"tell me about {w}", "texts": [f"filler text number {j}" for j in range(5)], "used": [i % 5]}
        for i, w in enumerate(words * 4)
    ]
    for g, w in zip(groups, words * 4):
        g["texts"][g["used"][0]] = f"all about {w} here"
    noise = [[0.0] * 5 for _ in groups]  # a model that knows nothing
    fusion = fit_fusion(groups, noise, positions=5)
    assert fusion["bm25_weight"] > 0 and fused_recall(groups, noise, fusion, 1) == 1.0
    assert fit_fusion(groups, noise, positions=5, lexical=False)["bm25_weight"] == 0.0


def test_recall_at_k():
    assert recall_at_k({0, 3}, [3, 1, 2], 2) == 0.5 and recall_at_k(set(), [0], 5) == 0.0
    groups = [{"query": "q", "texts": ["a", "b", "c"], "used": [2]}, {"query": "r", "texts": ["a", "b"], "used": [0]}]
    assert mean_recall(groups, None, 1) == 0.5  # retrieval order: the second query's first candidate is right
    assert mean_recall(groups, [[0.0, 0.1, 0.9], [0.5, 0.2]], 1) == 1.0


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
