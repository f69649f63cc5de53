import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

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
    load_key,
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
# params.yaml sections no dataclass loads, each with the reason: none today, every section has its config.
NO_DATACLASS: dict[str, str] = {}
# "section.key": why its dataclass default deliberately differs from params.yaml (e.g. a CPU vs a GPU profile):
# none today, a config built without params.yaml runs what `dvc repro` runs.
DIFFERENT_DEFAULT: dict[str, str] = {}
RAW = yaml.safe_load((REPO / "params.yaml").read_text())


@pytest.mark.parametrize("section,cls", SECTIONS.items())
def test_params_yaml_loads_into_every_config(section, cls):
    obj = load_section(REPO / "params.yaml", section, cls)
    assert isinstance(obj, cls)


def test_every_section_has_its_dataclass_or_a_reason():
    assert not set(SECTIONS) & set(NO_DATACLASS)
    assert set(RAW) == set(SECTIONS) | set(NO_DATACLASS), "a params.yaml section with no config (or a stale entry)"


def test_every_load_section_call_reads_the_config_listed_here():
    """Every `load_section(path, "section", Cls)` in the code uses the class this test checks for that section."""
    calls, bad = 0, []
    for pkg in ("retrieval", "serving", "training", "eval", "cli"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                name = getattr(getattr(node, "func", None), "id", None)
                if not isinstance(node, ast.Call) or name != "load_section" or len(node.args) != 3:
                    continue
                section, cls = node.args[1], node.args[2]
                assert isinstance(section, ast.Constant) and isinstance(cls, ast.Name), ast.unparse(node)
                calls += 1
                if section.value not in SECTIONS or SECTIONS[section.value].__name__ != cls.id:
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert calls > 30 and not bad, "\n".join(bad)


def test_every_key_in_params_yaml_is_a_field():
    for section, cls in SECTIONS.items():
        assert set(RAW[section]) == set(cls.__dataclass_fields__), section


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


@pytest.mark.parametrize("section,cls", SECTIONS.items())
def test_dataclass_defaults_are_the_params_yaml_values(section, cls):
    """params.yaml is the one source of defaults: a config built without it says the same, value and type."""
    loaded, bad = load_section(REPO / "params.yaml", section, cls), []  # typed as a stage reads it (60 -> 60.0)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        value = getattr(loaded, f.name)
        differs = value != default or type(value) is not type(default)
        if differs != (f"{section}.{f.name}" in DIFFERENT_DEFAULT):
            bad.append(f"{section}.{f.name}: params.yaml {value!r}, {cls.__name__} default {default!r}")
    assert not bad, "\n".join(bad)
    assert all(k.split(".")[0] in SECTIONS for k in DIFFERENT_DEFAULT)


def test_evaluate_reads_builds_split_not_a_copy():
    """One key per value: evaluate reads build.val_fraction itself, not a second key that must equal it."""
    assert "val_fraction" not in RAW["evaluate"] and "val_fraction" in RAW["build"]


def test_load_key_reads_one_typed_key_of_another_section(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("build:\n  val_fraction: 1\n")
    assert load_key(p, "build", "val_fraction", float) == 1.0  # an int is a float, as in load_section
    with pytest.raises(ParamsError, match="build.k must be set"):
        load_key(p, "build", "k", int)
    p.write_text("build:\n  val_fraction: half\n")
    with pytest.raises(ParamsError, match="build.val_fraction: expected float, got 'half'"):
        load_key(p, "build", "val_fraction", float)
    assert load_key(REPO / "params.yaml", "build", "val_fraction", float) == BuildParams().val_fraction


def test_staging_dir_is_under_pai_home_unless_absolute(monkeypatch, tmp_path):
    from retrieval.params import StagingParams

    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    assert StagingParams().path() == tmp_path / "home" / "staging"
    assert StagingParams(dir="st/x").path() == tmp_path / "home" / "st" / "x"
    assert StagingParams(dir=str(tmp_path / "elsewhere")).path() == tmp_path / "elsewhere"
    monkeypatch.delenv("PAI_HOME")
    assert StagingParams().path() == Path(".pai") / "staging"  # the default home, as before
