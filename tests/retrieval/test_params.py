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


# Which params a command reads (retrieval.params.params_files): an MCP client starts `pai mcp` in any folder.


def test_params_found_from_any_folder_with_the_homes_overrides(monkeypatch, tmp_path):
    from retrieval import params as P

    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert P.packaged_defaults() == REPO / "params.yaml"  # this checkout is the editable install's source
    assert P.params_files() == [REPO / "params.yaml"]  # no params.yaml here, none in the home: the defaults
    assert load_section(None, "search", SearchParams) == load_section(REPO / "params.yaml", "search", SearchParams)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "params.yaml").write_text("search:\n  top_k: 7\nstaging:\n  dir: elsewhere\n")
    sp = load_section(None, "search", SearchParams)
    assert sp.top_k == 7 and sp.rrf_k == load_section(REPO / "params.yaml", "search", SearchParams).rrf_k
    assert load_section(None, "staging", P.StagingParams).path() == tmp_path / "home" / "elsewhere"
    assert load_key(None, "build", "val_fraction", float) == load_key(
        REPO / "params.yaml", "build", "val_fraction", float
    )
    # an explicit --params is read alone: neither the defaults nor the home's overrides under it
    (tmp_path / "mine.yaml").write_text("search:\n  top_k: 9\n")
    assert load_section(tmp_path / "mine.yaml", "search", SearchParams).top_k == 9
    assert load_section(tmp_path / "mine.yaml", "staging", P.StagingParams).dir == "staging"


def test_a_checkout_reads_its_own_params_and_a_dvc_projects_params_is_not_ours(monkeypatch, tmp_path):
    from retrieval import params as P

    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "params.yaml").write_text("search:\n  top_k: 7\n")
    monkeypatch.chdir(REPO)
    assert P.params_files() == [Path("params.yaml")]  # what dvc repro reads: the home's overrides stay out
    assert (
        load_section(None, "search", SearchParams).top_k
        == load_section(REPO / "params.yaml", "search", SearchParams).top_k
    )
    project = tmp_path / "project"  # some DVC project's own params.yaml, where a client may start `pai mcp`
    project.mkdir()
    (project / "params.yaml").write_text("train:\n  epochs: 3\n")
    monkeypatch.chdir(project)
    assert P.params_files() == [REPO / "params.yaml", tmp_path / "home" / "params.yaml"]
    assert load_section(None, "search", SearchParams).top_k == 7


@pytest.mark.parametrize(
    "override, problem",
    [
        ("serach:\n  top_k: 7\n", "serach: unknown section"),
        ("search:\n  topk: 7\n  top_k: 7\n", "search.topk: unknown key"),
        ("search: 7\n", "search: must be a mapping"),
        ("- search\n", "expected a mapping of sections"),
        ("search:\n  top_k: [1\n", "not valid YAML"),
        ("search:\n  top_k: \x00\n", "not valid YAML"),
        ("search:\n  top_k: seven\n", "search.top_k: expected int"),
        ("search:\n  top_k: 0\n", "search.top_k must be in 1..1000"),
        ("search:\n  top_k: true\n", "search.top_k: expected int"),
        ("search:\n  top_k: " + "9" * 10_000 + "\n", "not valid YAML"),
        ("search:\n  top_k: " + "[" * 5_000 + "\n", "not valid YAML"),
    ],
)
def test_a_bad_home_override_is_one_line_naming_what(monkeypatch, tmp_path, override, problem):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "params.yaml").write_text(override)
    with pytest.raises(ParamsError) as e:
        load_section(None, "search", SearchParams)
    assert problem in str(e.value) and "\n" not in str(e.value)


def test_an_empty_home_override_changes_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("PAI_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for text in ("", "# nothing yet\n", "search:\n"):
        (tmp_path / "params.yaml").write_text(text)
        assert load_section(None, "search", SearchParams) == load_section(REPO / "params.yaml", "search", SearchParams)


def test_installed_from_a_wheel_the_defaults_are_under_the_prefix(monkeypatch, tmp_path):
    """A wheel installs params.yaml as <prefix>/share/pai-brain/params.yaml (pyproject.toml, data-files)."""
    from retrieval import params as P

    monkeypatch.setattr(P, "SOURCE_ROOT", tmp_path / "site-packages")  # no params.yaml beside the packages
    monkeypatch.setattr(P.sys, "prefix", str(tmp_path / "venv"))
    assert P.packaged_defaults() == tmp_path / "venv" / "share" / "pai-brain" / "params.yaml"


@pytest.mark.slow
def test_the_wheel_carries_params_yaml(tmp_path):
    import subprocess
    import sys
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path, REPO],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("pai_brain-*.whl")
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".data/data/share/pai-brain/params.yaml")]
        assert z.read(name) == (REPO / "params.yaml").read_bytes()
