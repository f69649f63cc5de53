"""Which cross-encoder size to serve (`pai lab sweep ce`): a folder of the asked size is reused, a new size is
trained by the real `train_ce` stage, and each is timed in every precision and scored side by side."""

import json
import shutil

import pytest


def test_sweep_reuses_a_matching_folder_trains_a_new_size_and_compares_them(tmp_path, ce_model_dir, benchmark_dir):
    from cli.ce_sweep import parse_config, sweep, table

    assert parse_config("3x64") == (3, 64)
    with pytest.raises(Exception, match="LAYERSxMAX_LENGTH"):
        parse_config("3-64")
    fb = json.loads((ce_model_dir / "ce_config.json").read_text())["feedback"]
    params = tmp_path / "params.yaml"
    params.write_text(
        f"build:\n  val_fraction: 0.3\nevaluate:\n  benchmarks: ''\n  feedback: {fb}\n"
        f"train_ce:\n  feedback: {fb}\n  probe_pairs: 64\n  batch_size: 8\n  learning_rate: 1.0e-7\n  evals: 1\n  patience: 1\n"
    )
    shutil.copytree(ce_model_dir, tmp_path / "sweep" / "2x32")  # the fixture's size: reused as it is
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
