"""Stage `train_ranker` on real data: HotpotQA train questions as a feedback log (used = the gold
paragraphs), the adapter and fusion fitted, and the written folder served as a selector."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest

from eval.registry import folder_record
from retrieval.contracts.ranking_features import features, gated_scores, general_floor, ranker_scores
from retrieval.contracts.selection import PromptCandidate, parse_selection
from retrieval.embed import get_embedder
from retrieval.params import UsedParams
from serving.ranker import RankerSelector
from serving.selectors import resolve
from tests.feedback_records import candidate
from tests.feedback_records import record as feedback_record
from training import train_ranker
from training.feedback_rankings import split_of3
from training.ranker_fit import fit_adapter, out_of_fold
from training.train_ranker import RankerParams, TooLittleFeedback, train


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
                "selector_version": "first-stage",
                "candidates": cands,
            }
        )
    return records


@pytest.fixture(scope="module")
def trained(benchmark_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranker")
    (tmp / "fb").mkdir()
    records = feedback_from_hotpotqa(benchmark_dir / "hotpotqa" / "train.jsonl", 200)
    (tmp / "fb" / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))  # for the stage
    p = RankerParams(feedback=str(tmp / "fb"), out=str(tmp / "ranker"), calibration_fraction=0.3)
    w, vecs, record, m = train(records, p, 0.2, UsedParams())  # the core: the records in memory
    return tmp, p, w, vecs, record, m


def test_the_ranker_learns_what_the_first_stage_order_misses(trained):
    _, _, w, _, record, m = trained
    assert m["train_queries"] > 50 and m["calibration_queries"] > 30 and m["val_queries"] > 20
    assert w.shape == (384, 384) and m["adapter_norm"] > 0  # the adapter moved off the base model
    # the candidates come in file order, so the retrieval order knows nothing: the ranker learned to weigh the evidence
    assert m["val_recall@5"] > m["val_recall@5_retrieval_order"] + 0.1
    assert record["weights"]["prior"] == 0.0 and record["weights"]["bm25"] > 0  # HotpotQA's answers share its words
    assert (
        record["weights"]["recalled"] == record["general_weights"]["recalled"] == 0.0
    )  # no question cites another's chunks
    assert record["input_format"] == "ranker-input/4"
    assert "dataset_sha256" not in record and "git_commit" not in record  # the stage stamps them (`main`)
    gate = record["domain_gate"]
    assert gate["lo"] == pytest.approx(gate["hi"] - 0.1) and 0 < gate["hi"] < 1
    assert m["val_gate_mean"] > 0.8  # held-out questions of the same kind are in the domain
    assert m["fusion_fallback"] is False and m["val_recall@5_ips_fitted"] == m["val_recall@5_ips"]


def test_a_fusion_fit_that_learned_noise_is_not_served(benchmark_dir, tmp_path):
    """The calibration queries' labels turned over (every wrong paragraph used, the gold ones not): the fusion
    fitted on them ranks the gold paragraphs last, the held-out queries say so, and the general weights serve."""
    records = feedback_from_hotpotqa(benchmark_dir / "hotpotqa" / "train.jsonl", 200)
    for r in records:
        if split_of3(r["query"], 0.2, 0.3) == "calibration":
            for c in r["candidates"]:
                c["used"] = not c["used"]
    p = RankerParams(calibration_fraction=0.3, cross_folds=0)  # the fusion fitted on the calibration band alone
    _, _, record, m = train(records, p, 0.2, UsedParams())
    assert m["fusion_fallback"] and record["weights"] == record["general_weights"]
    assert m["val_recall@5_ips_fitted"] < m["val_recall@5_ips_general"] - 0.05
    assert m["val_recall@5_ips"] == m["val_recall@5_ips_general"]  # what is served is what the general weights score


def test_cross_fitting_scores_every_query_with_an_adapter_that_never_saw_it():
    """`out_of_fold`: each query's features come from the fit that left its fold out, and every query gets some."""
    groups = [{"query": f"question number {i} about topic {i % 7}"} for i in range(60)]
    seen_by = {}

    def fit(gs):
        w = len(seen_by)  # the fit's id stands in for its adapter
        seen_by[w] = {g["query"] for g in gs}
        return w

    feats = out_of_fold(groups, 5, fit, lambda g, w: {"fit": w, "query": g["query"]})
    assert len(seen_by) == 5 and [f["query"] for f in feats] == [g["query"] for g in groups]
    assert all(f["query"] not in seen_by[f["fit"]] for f in feats)  # held out of the fit that scored it
    assert all(len(s) >= 30 for s in seen_by.values())  # each fit learned from the other folds
    assert feats == out_of_fold(groups, 5, fit, lambda g, w: {"fit": w - 5, "query": g["query"]})  # same folds again
    assert out_of_fold(groups[:1], 5, fit, lambda g, w: {}) is None  # one query: nothing to hold it out of


def test_cross_fitted_ranker_serves_an_adapter_that_learned_the_calibration_queries_too(trained):
    """cross_folds 5 (the default): the fusion is fitted on every train and calibration query's held-out adapted
    scores, and the served adapter on all of them: it knows the calibration queries better than the adapter of
    cross_folds 0 that never saw them; val stays held out of every fit."""
    tmp, p, w2, vecs2, record2, m2 = trained
    records = [json.loads(x) for x in (tmp / "fb" / "feedback.jsonl").read_text().splitlines()]
    w, _, record, m = train(records, replace(p, cross_folds=0), 0.2, UsedParams())
    assert m["adapter_queries"] == m["train_queries"] and m["fusion_fitted_on"] == "calibration"
    assert m2["adapter_queries"] == m2["train_queries"] + m2["calibration_queries"] == len(vecs2)
    assert m2["fusion_fitted_on"] == "cross-fitted" and record2["cross_folds"] == 5
    assert m2["val_queries"] == m["val_queries"] and m2["fusion_fallback"] is False
    assert m2["val_recall@5"] > m2["val_recall@5_retrieval_order"] + 0.1 and record2["weights"]["adapted"] > 0
    cal = [r for r in records if split_of3(r["query"], 0.2, 0.3) == "calibration"]
    embedder = get_embedder()
    q = embedder.encode([r["query"] for r in cal])

    def gold_rank(adapter):  # mean rank of the gold paragraphs under the adapted cosine alone
        ranks = []
        for r, qv in zip(cal, q):
            qa = qv + qv @ adapter
            P = embedder.encode_passages([c["heading"] + "\n" + c["text"] for c in r["candidates"]])
            order = np.argsort(-(P @ qa))
            ranks += [int(np.where(order == i)[0][0]) for i, c in enumerate(r["candidates"]) if c["used"]]
        return float(np.mean(ranks))

    assert gold_rank(w2) < gold_rank(w)


def test_queries_unlike_the_feedback_get_the_general_weights(trained, benchmark_dir):
    """Trained on HotpotQA questions, the ranker scores SciFact claims (another domain) mostly by the general
    weights, HotpotQA's own held-out questions by the fitted ones; the served scores are the contract's."""
    tmp, p, w, vecs, record, m = trained
    train_ranker.write(tmp / "gated", w, vecs, record, m)
    selector = RankerSelector(tmp / "gated", "ranker:gated")
    embedder = get_embedder()
    claims = [json.loads(line)["text"] for line in (benchmark_dir / "scifact" / "queries.jsonl").open()][:40]
    questions = [json.loads(line)["query"] for line in (benchmark_dir / "hotpotqa" / "dev.jsonl").open()][:40]
    claim_gates = [selector.fitted_share(v) for v in embedder.encode(claims)]
    question_gates = [selector.fitted_share(v) for v in embedder.encode(questions)]
    assert np.mean(claim_gates) < 0.3 and np.mean(question_gates) > 0.8
    assert 0.0 in claim_gates and min(question_gates) > 0.0
    cands = [
        PromptCandidate("a.md", None, "Amylase is an enzyme in saliva."),
        PromptCandidate("b.md", None, "Amylase digests starch into sugars in the mouth."),
        PromptCandidate("c.md", None, "Paris is in France."),
    ]
    texts = [c.text for c in cands]
    for query in (claims[claim_gates.index(0.0)], questions[0]):
        q = embedder.encode([query])[0]
        floor = general_floor(
            query, record["bm25_sd_floor"], record["general_plain_floor"], record["name_ramp"], record["rare_ramp"]
        )
        f = features(
            query,
            q,
            embedder.encode_passages(texts),
            texts,
            w,
            bm25_sd_floor=record["bm25_sd_floor"],
            general_bm25_floor=floor,
        )
        gate = selector.fitted_share(q)
        expected = gated_scores(f, record["weights"], record["general_weights"], gate)
        assert np.allclose(selector.scores(query, cands), expected)
        if gate == 0.0:
            general_view = f | {"bm25": f["bm25_general"]}  # the general weights under the query's own floor
            assert np.allclose(expected, ranker_scores(general_view, record["general_weights"]))


def test_no_steps_no_adapter():
    g = [{"q": np.eye(4, dtype=np.float32)[0], "P": np.eye(4, dtype=np.float32), "texts": list("abcd"), "used": [2]}]
    assert not fit_adapter(g, l2=0.1, steps=0, lr=0.01, temperature=0.05, seed=13).any()


def test_the_written_folder_is_served_as_trained(trained, monkeypatch):
    """The stage (`main`) on the log file trains what the core trains on its records in memory, and stamps the
    record with the hash of the bytes it read and the commit."""
    tmp, p, w, _, record, m = trained
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp}/mlflow.db")
    (tmp / "params.yaml").write_text(
        f"build: {{val_fraction: 0.2}}\ntrain_ranker: {{feedback: {p.feedback}, out: {p.out}, calibration_fraction: 0.3}}\n"
    )
    train_ranker.main(str(tmp / "params.yaml"))
    out = tmp / "ranker"
    cfg = json.loads((out / "ranker_config.json").read_text())
    assert cfg["weights"] == record["weights"] and np.array_equal(np.load(out / "adapter.npy"), w)
    assert cfg["dataset_sha256"] == hashlib.sha256((tmp / "fb" / "feedback.jsonl").read_bytes()).hexdigest()
    assert "git_commit" in cfg and cfg["mlflow_run_id"]
    assert {k: v for k, v in cfg.items() if k not in ("dataset_sha256", "git_commit", "mlflow_run_id")} == record
    written = json.loads((out / "metrics.json").read_text())
    assert {k: v for k, v in written.items() if k != "seconds"} == {k: v for k, v in m.items() if k != "seconds"}
    selector = resolve(folder_record("ranker", out))
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
    assert RankerParams(cross_folds=1).problems() == [
        "train_ranker: need fallback_tolerance >= 0 and cross_folds 0 (off) or >= 2"
    ]


def test_a_broken_folder_is_refused_with_a_load_error(tmp_path):
    from serving.interface import SelectorLoadError

    with pytest.raises(SelectorLoadError, match="not a trained ranker folder"):
        RankerSelector(tmp_path, "ranker:x")
    np.save(tmp_path / "adapter.npy", np.zeros((3, 3), dtype=np.float32))
    np.save(tmp_path / "queries.npy", np.zeros((2, 384), dtype=np.float32))
    complete = {
        "input_format": "ranker-input/2",
        "weights": {"bm25": 1.0},
        "general_weights": {"similarity": 1.0},
        "domain_gate": {"k": 10, "lo": 0.2, "hi": 0.3},
    }
    (tmp_path / "ranker_config.json").write_text(json.dumps(complete))
    with pytest.raises(SelectorLoadError, match="shape"):
        RankerSelector(tmp_path, "ranker:x")
    np.save(tmp_path / "adapter.npy", np.zeros((384, 384), dtype=np.float32))
    (tmp_path / "ranker_config.json").write_text(json.dumps({**complete, "domain_gate": {"k": 10}}))
    with pytest.raises(SelectorLoadError, match="domain gate"):
        RankerSelector(tmp_path, "ranker:x")
    for floor in ("0.2", -1, True, None, float("inf"), float("nan")):
        (tmp_path / "ranker_config.json").write_text(json.dumps({**complete, "bm25_sd_floor": floor}))
        with pytest.raises(SelectorLoadError, match="bm25_sd_floor"):
            RankerSelector(tmp_path, "ranker:x")
    bad_values = [
        {**complete, "weights": {"bm25": None}},
        {**complete, "general_weights": {"similarity": float("nan")}},
        {**complete, "domain_gate": {"k": 10**400, "lo": 0.2, "hi": 0.3}},
        {**complete, "domain_gate": {"k": 10, "lo": "0.2", "hi": 0.3}},
    ]
    for cfg in bad_values:
        (tmp_path / "ranker_config.json").write_text(json.dumps(cfg))
        with pytest.raises(SelectorLoadError, match="not a finite number"):
            RankerSelector(tmp_path, "ranker:x")
    (tmp_path / "ranker_config.json").write_text("[1, 2]")
    with pytest.raises(SelectorLoadError, match="not a JSON object"):
        RankerSelector(tmp_path, "ranker:x")
    (tmp_path / "ranker_config.json").write_text(json.dumps(complete))  # saved before the floor: plain, as trained
    assert RankerSelector(tmp_path, "ranker:x").bm25_sd_floor == 0.0
    (tmp_path / "ranker_config.json").write_text(json.dumps({**complete, "bm25_sd_floor": 0.2}))
    assert RankerSelector(tmp_path, "ranker:x").bm25_sd_floor == 0.2
    for key, value in (
        ("general_plain_floor", -0.5),
        ("general_plain_floor", "1"),
        ("name_ramp", 2),
        ("name_ramp", None),
        ("rare_ramp", 1.5),
        ("rare_ramp", "0.3"),
    ):
        (tmp_path / "ranker_config.json").write_text(json.dumps({**complete, "bm25_sd_floor": 0.2, key: value}))
        with pytest.raises(SelectorLoadError, match="general_plain_floor .* or name_ramp"):
            RankerSelector(tmp_path, "ranker:x")
    (tmp_path / "ranker_config.json").write_text(json.dumps({**complete, "bm25_sd_floor": 0.2}))
    old = RankerSelector(tmp_path, "ranker:x")  # saved before the per-query floor: the general BM25 as trained
    assert (old.general_plain_floor, old.name_ramp, old.rare_ramp) == (0.2, 0.0, 0.0)  # rare words not read
    cfg = {**complete, "bm25_sd_floor": 0.2, "general_plain_floor": 1.0, "name_ramp": 0.2}
    (tmp_path / "ranker_config.json").write_text(json.dumps(cfg))
    new = RankerSelector(tmp_path, "ranker:x")
    assert (new.bm25_sd_floor, new.general_plain_floor, new.name_ramp, new.rare_ramp) == (0.2, 1.0, 0.2, 0.0)
    (tmp_path / "ranker_config.json").write_text(json.dumps({**cfg, "rare_ramp": 0.3}))
    assert RankerSelector(tmp_path, "ranker:x").rare_ramp == 0.3
    (tmp_path / "ranker_config.json").write_text(json.dumps({"input_format": "other/9"}))
    with pytest.raises(SelectorLoadError, match="input format"):
        RankerSelector(tmp_path, "ranker:x")


def test_too_little_feedback_is_a_typed_one_line_error_before_anything_loads(tmp_path):
    """No used candidate (none logged, all ignored, thumbs down voiding them, hostile text): `TooLittleFeedback`
    from the core, before any model loads; the same line and exit status 1 from the stage, nothing written."""
    hostile = "\x00" + "x" * 200_000  # a NUL and a huge query, nothing used
    logs = {
        "none": [],
        "all ignored": [
            feedback_record([candidate(1, False), candidate(2, False)], f"query {i}", i) for i in range(40)
        ],
        "voided": [feedback_record([candidate(1, True)], f"query {i}", i, rating=-1) for i in range(40)],
        "hostile": [feedback_record([candidate(1, False, text=hostile)], hostile, 1)],
    }
    for name, records in logs.items():
        with pytest.raises(TooLittleFeedback) as e:
            train(records, RankerParams(), 0.2, UsedParams())
        message = str(e.value)
        assert message.startswith("train_ranker: no train query with a used candidate ({'train': 0") and (
            "\n" not in message
        ), name
        assert isinstance(e.value, ValueError)  # bad input: the lab's commands turn it into their one-line error
    (tmp_path / "fb").mkdir()
    (tmp_path / "fb" / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs["all ignored"]))
    (tmp_path / "params.yaml").write_text(
        f"build: {{val_fraction: 0.2}}\ntrain_ranker: {{feedback: {tmp_path / 'fb'}, out: {tmp_path / 'out'}}}\n"
    )
    with pytest.raises(SystemExit) as e:
        train_ranker.main(str(tmp_path / "params.yaml"))
    assert (
        e.value.code == "train_ranker: no train query with a used candidate ({'train': 0, 'calibration': 0, 'val': 0})"
    )
    assert not (tmp_path / "out").exists()


def test_the_recalled_weight_is_the_one_the_held_out_recall_asks_for():
    """`recalled_weight`: where what similar questions cited is the used chunk that the other features rank last, the
    weight that lifts it into the top k; where it points at chunks the consumer passed over, 0; no evidence, 0."""
    from training.train_ranker import RECALLED_WEIGHTS, recalled_weight

    n = 10
    similarity = -0.5 * np.arange(n, dtype=float)  # the text ranks the candidates in order: the 5th at -2, the 9th -4
    groups = [{"texts": ["t"] * n, "used": [8], "weights": [1.0] * n} for _ in range(4)]
    lifted = [{"similarity": similarity, "recalled": np.eye(n)[8]} for _ in groups]
    assert (
        recalled_weight(lifted, groups, {"similarity": 1.0}, 5)[0] == min(r for r in RECALLED_WEIGHTS if r > 2) == 3.0
    )
    misled = [{"similarity": similarity, "recalled": np.eye(n)[9] * 0.5} for _ in groups]
    assert recalled_weight(misled, groups, {"similarity": 1.0}, 5)[0] == 0.0
    none = [{"similarity": similarity, "recalled": np.zeros(n)} for _ in groups]
    assert recalled_weight(none, groups, {"similarity": 1.0}, 5) == (0.0, {})
