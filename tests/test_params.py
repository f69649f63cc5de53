from pathlib import Path

import pytest

from cli.replay import ReplayParams
from eval.code_bench import CodeBenchParams
from eval.deploy import DeployParams
from eval.evaluate import EvaluateParams
from eval.scifact_bench import BenchmarkParams
from retrieval.capture import CaptureParams
from retrieval.params import (
    EmbedParams,
    IngestParams,
    MaintainParams,
    ParamsError,
    SearchParams,
    StagingParams,
    load_section,
)
from training.build import BuildParams
from training.export import ExportParams
from training.pull import PullParams
from training.train import TrainParams
from training.train_ce import CrossEncoderParams
from training.train_ranker import RankerParams

REPO = Path(__file__).resolve().parents[1]
SECTIONS = {
    "embed": EmbedParams,
    "ingest": IngestParams,
    "search": SearchParams,
    "staging": StagingParams,
    "replay": ReplayParams,
    "capture": CaptureParams,
    "pull": PullParams,
    "build": BuildParams,
    "train": TrainParams,
    "train_ce": CrossEncoderParams,
    "train_ranker": RankerParams,
    "export": ExportParams,
    "benchmark": BenchmarkParams,
    "code_bench": CodeBenchParams,
    "evaluate": EvaluateParams,
    "deploy": DeployParams,
    "maintain": MaintainParams,
}


@pytest.mark.parametrize("section,cls", SECTIONS.items())
def test_params_yaml_loads_into_every_config(section, cls):
    obj = load_section(REPO / "params.yaml", section, cls)
    assert isinstance(obj, cls)


def test_every_key_in_params_yaml_is_a_field():
    import yaml

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    for section, cls in SECTIONS.items():
        assert set(raw[section]) == set(cls.__dataclass_fields__), section


def test_all_problems_reported_at_once(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("search:\n  top_k: 0\n  keyword: bm99\n  ef_search: fast\n  bogus: 1\n")
    with pytest.raises(ParamsError) as e:
        load_section(p, "search", SearchParams)
    msg = str(e.value)
    assert "search.bogus: unknown key" in msg and "search.ef_search: expected int" in msg
    p.write_text("search:\n  top_k: 0\n  keyword: bm99\n")
    with pytest.raises(ParamsError) as e:
        load_section(p, "search", SearchParams)
    assert "top_k" in str(e.value) and "bm99" in str(e.value)


def test_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(ParamsError, match="no such params file"):
        load_section(tmp_path / "nope.yaml", "search", SearchParams)


def test_int_accepted_for_float_but_bool_not_for_int(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("search:\n  threshold: 0\n  top_k: true\n")
    with pytest.raises(ParamsError, match="top_k: expected int"):
        load_section(p, "search", SearchParams)
    p.write_text("search:\n  threshold: 0\n")
    assert load_section(p, "search", SearchParams).threshold == 0.0


def test_dataclass_defaults_are_the_params_yaml_values():
    """params.yaml is the one source of defaults: a config built without it says the same."""
    import dataclasses

    import yaml

    raw, bad = yaml.safe_load((REPO / "params.yaml").read_text()), []
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            if f.name in raw[section] and raw[section][f.name] != default:
                bad.append(
                    f"{section}.{f.name}: params.yaml {raw[section][f.name]!r}, {cls.__name__} default {default!r}"
                )
    assert not bad, "\n".join(bad)


def test_staging_dir_is_under_pai_home_unless_absolute(monkeypatch, tmp_path):
    from retrieval.params import StagingParams

    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    assert StagingParams().path() == tmp_path / "home" / "staging"
    assert StagingParams(dir="st/x").path() == tmp_path / "home" / "st" / "x"
    assert StagingParams(dir=str(tmp_path / "elsewhere")).path() == tmp_path / "elsewhere"
    monkeypatch.delenv("PAI_HOME")
    assert StagingParams().path() == Path(".pai") / "staging"  # the default home, as before
