"""params.yaml against every stage's config: each section loads into its dataclass, every key is a field, every
default is the file's value, and every `load_section` call reads the class listed here. How one section is
read (errors, types, `load_key`): tests/retrieval/test_params.py."""

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from cli.knobs import SECTIONS  # every params.yaml section and its dataclass, in the file's order
from retrieval.params import load_section

REPO = Path(__file__).resolve().parents[1]
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


# Each output folder is declared once in params.yaml (an anchor); its readers alias it, dvc.yaml interpolates it
# (`${section.key}`) and `pai lab cycle` reads it from the params: changing the declaration moves every reader.
PATHS = {
    "pull.out": ("build.feedback", "train_ranker.feedback", "evaluate.feedback", "maintain.feedback"),
    "train.out": ("export.model",),
    "train_ranker.out": ("evaluate.ranker", "deploy.ranker"),
    "export.out": ("evaluate.model", "deploy.export"),
    "evaluate.out": ("deploy.metrics",),
}


def test_every_alias_in_params_yaml_is_a_reader_listed_in_paths():
    """A key that aliases a declared path (`*name`) is one of PATHS' readers of it, so the test below moves it."""
    text = (REPO / "params.yaml").read_text()
    anchors, section, aliases = {}, None, []
    for line in text.splitlines():
        if m := re.match(r"^(\w+):", line):
            section = m.group(1)
        elif m := re.match(r"^  (\w+): &(\w+) ", line):
            anchors[m.group(2)] = f"{section}.{m.group(1)}"
        elif m := re.match(r"^  (\w+): \*(\w+)", line):
            aliases.append((f"{section}.{m.group(1)}", m.group(2)))
    assert aliases
    missing = [r for r, a in aliases if r not in PATHS.get(anchors[a], ())]
    assert not missing, f"add to PATHS in tests/test_params.py: {missing}"


@pytest.mark.parametrize("declared,readers", PATHS.items())
def test_each_path_is_declared_once_and_every_reader_follows_it(tmp_path, declared, readers):
    section, key = declared.split(".")
    old, text = RAW[section][key], (REPO / "params.yaml").read_text()
    value = re.compile(rf"^(  {key}: &\w+ ){re.escape(old)}(?=\s)", re.M)
    assert len(value.findall(text)) == 1, f"{declared} is not declared once, with an anchor"
    assert not re.search(rf":\s+{re.escape(old)}(\s|$)", value.sub("", text)), f"{old} written twice in params.yaml"
    stages = yaml.safe_dump(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
    assert not re.search(rf"(^|[\s:]){re.escape(old)}/", stages, re.M), "a dvc.yaml stage: write ${section.key}"
    params = tmp_path / "params.yaml"
    params.write_text(value.sub(rf"\g<1>elsewhere/{old}", text))
    for reader in (declared, *readers):
        s, k = reader.split(".")
        assert getattr(load_section(params, s, SECTIONS[s]), k) == f"elsewhere/{old}", reader


def test_the_cycle_reads_every_stage_metrics_file_where_params_yaml_puts_it(tmp_path):
    from cli.repro import stage_metrics

    assert stage_metrics(REPO / "params.yaml")["eval"] == Path("metrics/eval.json")
    params = tmp_path / "params.yaml"
    text = (REPO / "params.yaml").read_text()
    for declared in ("pull.out", "train.out", "export.out", "evaluate.out", "build.out"):
        section, key = declared.split(".")
        text = re.sub(
            rf"^(  {key}: (&\w+ )?){re.escape(RAW[section][key])}(?=\s)", r"\1moved", text, count=0, flags=re.M
        )
    params.write_text(text)
    assert all(p.parent == Path("moved") for p in stage_metrics(params).values()), stage_metrics(params)
