"""Typed views of params.yaml (retrieval/params.py): every problem of a section reported at once, a missing file
as one clear error, ints taken for floats but bools not for ints, one typed key read from another section, and
the staging folder under $PAI_HOME. That params.yaml loads into every stage's config: tests/test_params.py."""

from pathlib import Path

import pytest

from retrieval.params import ParamsError, SearchParams, load_key, load_section
from training.build import BuildParams

REPO = Path(__file__).resolve().parents[2]


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
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert StagingParams().path() == tmp_path / "data" / "pai-brain" / "staging"  # the user's home, any cwd
