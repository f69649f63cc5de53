"""One description per knob (cli/knobs.py): params.yaml's comments and docs/configuration.md's reference are what
the dataclasses' field descriptions make of them, params.yaml holds no figure, and a value the docs quote for a
knob is params.yaml's."""

import re
from pathlib import Path

import pytest
import yaml

from cli.knobs import SECTIONS, KnobsError, field_docs, outputs, render_params

REPO = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((REPO / "params.yaml").read_text())


@pytest.mark.parametrize("name", ["params.yaml", "configuration.md"])
def test_generated_files_are_what_the_descriptions_make(name):
    (now, should) = next(v for p, v in outputs(REPO).items() if p.name == name)
    assert now == should, f"{name} has drifted from the dataclasses' descriptions: run python -m cli.knobs"


def test_an_edited_comment_is_written_back_and_an_unknown_key_is_one_error():
    text = (REPO / "params.yaml").read_text()
    edited = text.replace("# candidates written to the staging file", "# candidates (edited by hand)", 1)
    assert edited != text and render_params(edited) == render_params(text)
    with pytest.raises(KnobsError, match=r"search\.top_kk is not a field of SearchParams"):
        render_params(text.replace("  top_k: 20", "  top_kk: 20", 1))


def test_every_field_has_one_description():
    for cls in SECTIONS.values():
        assert all(len(d) > 8 for d in field_docs(cls).values()), cls.__name__


def test_params_yaml_holds_no_figure():
    """Why a value was chosen lives in docs/measurements.md with its command and machine, not in params.yaml:
    no date, confidence interval, seed count or before/after figure."""
    figure = re.compile(r"\d{4}-\d\d-\d\d|\[[+-]?\d\.\d+,|±|\d+ seeds|\d\.\d+ ?(->|→|vs) ?\d|stop \d+|issue \d+")
    bad = [line for line in (REPO / "params.yaml").read_text().splitlines() if figure.search(line)]
    assert not bad, "\n".join(bad)


def _knob_names() -> dict[str, object]:
    """name -> value for every `section.key`, and for every key no other section has."""
    out, seen = {}, {}
    for section, keys in RAW.items():
        for key, value in keys.items():
            out[f"{section}.{key}"] = value
            seen.setdefault(key, []).append(value)
    return out | {k: v[0] for k, v in seen.items() if len(v) == 1}


# "`knob` (0.03)" or "`knob` 0.03" quotes the default; "`knob: 0`" (one code span) is a setting the text suggests.
QUOTED = re.compile(r"`([a-z_]+(?:\.[a-z_]+)?)`\s*\(?=?\s*(-?\d[\d,_]*(?:\.\d+)?)\b")


def test_values_quoted_in_the_docs_are_params_yaml_values():
    """`margin` (0.03), `explore_rate` 0.05: where the docs quote a knob's value, it is the value params.yaml gives (docs/measurements.md records the values of past runs and is left out)."""
    knobs, bad, found = _knob_names(), [], 0
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        if path.name == "measurements.md":
            continue
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            for name, number in QUOTED.findall(line):
                if name not in knobs or isinstance(knobs[name], str):
                    continue
                found += 1
                if float(number.replace(",", "").replace("_", "")) != float(knobs[name]):
                    bad.append(f"{path.name}:{n}: `{name}` {number}, params.yaml {knobs[name]}")
    assert found > 10 and not bad, "\n".join(bad)
