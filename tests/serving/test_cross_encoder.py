"""The cross-encoder selector on a tiny model trained by the real `train_ce` stage on literal feedback."""

import json
import shutil
import threading
from pathlib import Path

import pytest

from retrieval.ce_input import CE_INPUT_FORMAT, ce_passage
from retrieval.cpu_dtype import ce_dtype
from retrieval.learned_fusion import fuse_scores
from retrieval.lexical import lexical_scores
from retrieval.selection import PromptCandidate, parse_selection
from serving.cross_encoder import CrossEncoderSelector
from serving.interface import SelectorLoadError

TOPICS = [
    ("starch", "Amylase digests starch into sugars."),
    ("volcano", "Lava erupts from a volcano."),
    ("planet", "Jupiter is the largest planet."),
    ("river", "The Nile river flows north."),
    ("piano", "A piano has eighty-eight keys."),
    ("honey", "Bees make honey from nectar."),
]
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
        rows.append(
            {
                "query_id": n,
                "query": query(word),
                "threshold": None,
                "selector_version": "similarity",
                "candidates": [
                    {
                        "rank": r,
                        "chunk_id": r,
                        "content_hash": "h",
                        "score": 0.5,
                        "source": "/d.md",
                        "heading": None,
                        "text": t,
                        "pick_rank": None,
                        "used": u,
                    }
                    for r, (t, u) in enumerate(cands, start=1)
                ],
            }
        )
    (tmp / "fb").mkdir()
    (tmp / "fb" / "feedback.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp}/mlflow.db")
        # the probe head is fitted on exactly these pairs; the fine-tune steps only exercise the loop
        train(
            CrossEncoderParams(
                feedback=str(tmp / "fb"),
                out=str(tmp / "out"),
                layers=2,
                max_length=32,
                probe_pairs=64,
                epochs=1.0,
                batch_size=8,
                learning_rate=1e-7,
                evals=2,
                patience=1,
            ),
            val_fraction=0.3,
        )
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


def test_input_format_is_the_one_training_renders(model_dir):
    assert json.loads((model_dir / "ce_config.json").read_text())["input_format"] == CE_INPUT_FORMAT
    assert [ce_passage(h, "body") for h in ("Title", None, "")] == ["Title\nbody", "body", "body"]


def test_refuses_a_folder_without_a_finished_run(tmp_path, model_dir):
    with pytest.raises(SelectorLoadError, match="not a trained cross-encoder"):
        CrossEncoderSelector(tmp_path, version="x")
    (tmp_path / "ce_config.json").write_text(json.dumps({"input_format": "ce-input/0", "max_length": 32}))
    with pytest.raises(SelectorLoadError, match="input format"):
        CrossEncoderSelector(tmp_path, version="x")


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads the CPU flags from /proc/cpuinfo")
def test_auto_precision_is_bfloat16_only_where_the_cpu_computes_it():
    flags = {f for line in open("/proc/cpuinfo") if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    assert ce_dtype("auto") == ("bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32")
    assert (ce_dtype("float32"), ce_dtype("bfloat16")) == ("float32", "bfloat16")
    with pytest.raises(ValueError, match="float16"):
        ce_dtype("float16")


def test_bfloat16_serving_scores_as_float32_does(model_dir):
    import torch

    f32, b16 = (
        CrossEncoderSelector(model_dir, "f32", dtype="float32"),
        CrossEncoderSelector(model_dir, "b16", dtype="bfloat16"),
    )
    assert next(f32.model.parameters()).dtype == torch.float32 and next(b16.model.parameters()).dtype == torch.bfloat16
    for word, _ in TOPICS:
        a, b = f32.scores(query(word), candidates(12)), b16.scores(query(word), candidates(12))
        spread = max(a) - min(a)
        assert spread > 0 and max(abs(x - y) for x, y in zip(a, b)) < 0.05 * spread + 0.02, word


def test_serves_in_the_folders_precision_and_refuses_an_unknown_one(tmp_path, model_dir):
    folder = tmp_path / "ce"
    shutil.copytree(model_dir, folder)
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


def test_latency_bench_times_every_call_on_the_shared_benchmark(model_dir, benchmark_dir):
    from eval.bench.ce import bench, hotpotqa_sets, scifact_sets

    hotpot, scifact = (
        hotpotqa_sets(benchmark_dir / "hotpotqa" / "test.jsonl", 3),
        scifact_sets(benchmark_dir / "scifact", 3),
    )
    for sets in (hotpot, scifact):
        assert len(sets) == 3 and all(len(c) == 20 for _, c in sets) and len({q for q, _ in sets}) == 3
        assert all(len({c.source for c in cands}) == 20 for _, cands in sets)
    row = bench(model_dir, scifact, repeats=2, dtype="float32")
    assert (row["calls"], row["candidates"], row["layers"], row["max_length"], row["dtype"]) == (
        6,
        20,
        2,
        32,
        "float32",
    )
    assert 0 < row["p50_ms"] <= row["p95_ms"]


def test_fusion_ablation_scores_each_variant(tmp_path, model_dir):
    from cli.fusion_ablation import VARIANTS, run, variant_scores

    fusion = {"ce_weight": 1.0, "rank_bias": [-0.5 * i for i in range(20)], "bm25_weight": 0.0}
    texts = ["a", "b", "c"]
    v = variant_scores(
        [0.0, 0.0, 3.0],
        texts,
        "q",
        {"position": fusion, "position+bm25": fusion, "no model": {**fusion, "ce_weight": 0.0}},
    )
    assert (
        list(v) == list(VARIANTS) and v["retrieval order"] == [0.0, -1.0, -2.0] and v["model alone"] == [0.0, 0.0, 3.0]
    )
    assert v["+ position prior"] == [0.0, -0.5, 2.0] and v["prior + BM25, no model"] == [0.0, -0.5, -1.0]

    params = tmp_path / "params.yaml"
    params.write_text(
        f"build:\n  val_fraction: 0.3\nevaluate:\n  benchmarks: ''\n  feedback: {model_dir.parent / 'fb'}\n"
    )
    out = run(model_dir, max_queries=10, params=str(params), dtype="float32")
    assert out["dtype"] == "float32" and out["weights"]["no model"]["ce_weight"] == 0.0
    assert set(out["benchmarks"]) == {"train_ce val (served order)", "feedback/val"}
    for row in out["benchmarks"].values():
        assert row["queries"] >= 1 and all(0.0 <= row[v] <= 1.0 for v in VARIANTS)
    # the same through `pai lab ablation`: --json prints the result on stdout, --out writes it
    from typer.testing import CliRunner

    from cli.main import app

    r = CliRunner().invoke(
        app,
        [
            "lab",
            "ablation",
            "--model-dir",
            str(model_dir),
            "--max-queries",
            "10",
            "--params",
            str(params),
            "--dtype",
            "float32",
            "--json",
            "--out",
            str(tmp_path / "ablation.json"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == json.loads((tmp_path / "ablation.json").read_text()) == json.loads(json.dumps(out))


def test_sweep_reuses_a_matching_folder_trains_a_new_size_and_compares_them(tmp_path, model_dir, benchmark_dir):
    from cli.ce_sweep import parse_config, sweep, table

    assert parse_config("3x64") == (3, 64)
    with pytest.raises(Exception, match="LAYERSxMAX_LENGTH"):
        parse_config("3-64")
    fb = json.loads((model_dir / "ce_config.json").read_text())["feedback"]
    params = tmp_path / "params.yaml"
    params.write_text(
        f"build:\n  val_fraction: 0.3\nevaluate:\n  benchmarks: ''\n  feedback: {fb}\n"
        f"train_ce:\n  feedback: {fb}\n  probe_pairs: 64\n  batch_size: 8\n  learning_rate: 1.0e-7\n  evals: 1\n  patience: 1\n"
    )
    shutil.copytree(model_dir, tmp_path / "sweep" / "2x32")  # the fixture's size: reused as it is
    logs: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
        rows = sweep(
            [(2, 32), (1, 24)],
            tmp_path / "sweep",
            ["float32", "bfloat16"],
            benchmark_dir,
            queries=2,
            max_queries=5,
            params=str(params),
            log=logs.append,
        )
    assert [m for m in logs if "training" in m] == [
        f"ce_sweep: training {tmp_path / 'sweep' / '1x24'} (1 layers, 24 word pieces)"
    ]
    assert json.loads((tmp_path / "sweep" / "1x24" / "ce_config.json").read_text())["max_length"] == 24
    assert [(r["config"], r["dtype"]) for r in rows] == [
        ("2x32", "float32"),
        ("2x32", "bfloat16"),
        ("1x24", "float32"),
        ("1x24", "bfloat16"),
    ]
    for r in rows:
        assert set(r["latency"]) == {"hotpotqa", "scifact"} and all(
            v["max_length"] == r["max_length"] for v in r["latency"].values()
        )
        assert set(r["recall"]) == {"train_ce val (served order)", "feedback/val"}
    assert table(rows).row_count == 4
