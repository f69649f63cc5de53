"""params.yaml against every stage's config: each section loads into its dataclass, every key is a field, every
default is the file's value, and every `load_section` call reads the class listed here. How one section is
read (errors, types, `load_key`): tests/retrieval/test_params.py."""

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
from retrieval.contracts.interleaving import TrialParams
from retrieval.conversation.capture import CaptureParams
from retrieval.params import (
    EmbedParams,
    IngestParams,
    MaintainParams,
    SearchParams,
    StagingParams,
    UsedParams,
    load_section,
)
from training.build import BuildParams
from training.export import ExportParams
from training.pull import PullParams
from training.train import TrainParams
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
    "used": UsedParams,
    "build": BuildParams,
    "train": TrainParams,
    "train_ranker": RankerParams,
    "export": ExportParams,
    "benchmark": BenchmarkParams,
    "code_bench": CodeBenchParams,
    "evaluate": EvaluateParams,
    "deploy": DeployParams,
    "trial": TrialParams,
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
