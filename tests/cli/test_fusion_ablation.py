"""Which parts of the cross-encoder's fusion help (`pai lab ablation`): each variant's scores, literal, then
Recall@5 of every variant on the session's tiny trained model, through the function and the command."""

import json


def test_fusion_ablation_scores_each_variant(tmp_path, ce_model_dir):
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
        f"build:\n  val_fraction: 0.3\nevaluate:\n  benchmarks: ''\n  feedback: {ce_model_dir.parent / 'fb'}\n"
    )
    out = run(ce_model_dir, max_queries=10, params=str(params), dtype="float32")
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
            str(ce_model_dir),
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
