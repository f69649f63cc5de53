"""`pai lab loop report`'s params: params.yaml with the loop's consumer and exploration switched as asked, every
other setting as it was."""

import yaml

from cli.lab.onpolicy import loop_params


def test_loop_params_switch_only_what_the_loop_asks(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump({"search": {"explore_rate": 0.0, "top_k": 20}, "train_ranker": {"ipw_clip": 0.05}})
    )
    (tmp_path / "loop").mkdir()
    out = loop_params(params, tmp_path / "loop", "oracle", 0.1)
    assert out == tmp_path / "loop" / "params.yaml"
    assert yaml.safe_load(out.read_text()) == {
        "search": {"explore_rate": 0.1, "top_k": 20},
        "train_ranker": {"ipw_clip": 0.05},
        "replay": {"consumer": "oracle"},
    }
    raw = yaml.safe_load(loop_params(params, tmp_path / "loop", "realistic", None).read_text())
    assert raw["search"]["explore_rate"] == 0.0 and raw["train_ranker"]["ipw_clip"] == 0.05
    assert raw["replay"] == {"consumer": "realistic"}
