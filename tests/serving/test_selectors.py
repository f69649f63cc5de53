"""`resolve`: the one way from a registry record, a name or a path to a selector (service, eval, deploy, CLI)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.main import app as cli
from eval.registry import RegistryError, verify
from serving.interface import SelectorLoadError
from serving.ranker import RankerSelector
from serving.selectors import FirstStageSelector, path_record, resolve


def test_a_ranker_folder_and_its_record_give_the_same_selector(tmp_path, make_ranker):
    folder = make_ranker(tmp_path / "ranker", {"similarity": 1.0})
    by_path = resolve(folder)
    by_record = resolve({"kind": "ranker", "model_dir": str(folder), "version": "ranker:abc"})
    assert isinstance(by_path, RankerSelector) and isinstance(by_record, RankerSelector)
    assert by_path.version == "ranker:ranker" and by_record.version == "ranker:abc"
    assert resolve(str(folder)).version == by_path.version  # a string path too


def test_names_exports_and_ggufs_become_records(tmp_path):
    assert isinstance(resolve("first-stage"), FirstStageSelector)
    assert isinstance(resolve("similarity"), FirstStageSelector)  # its old name, for one release
    assert isinstance(resolve({"kind": "similarity", "version": "similarity"}), FirstStageSelector)  # a record of then
    export = tmp_path / "export"
    export.mkdir()
    record = {"version": "v1", "gguf": str(export / "m.gguf"), "chunk_tokens": 200, "ollama_tag": "pai-selector:1"}
    (export / "selector.json").write_text(json.dumps(record))
    assert path_record(export) == record == path_record(export / "selector.json")
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    assert path_record(tmp_path / "tiny.gguf") == {
        "version": "gguf:tiny",
        "gguf": str(tmp_path / "tiny.gguf"),
        "chunk_tokens": 200,
    }


def test_a_retired_cross_encoder_is_refused_in_one_line(tmp_path):
    """The cross-encoder was retired: its registry record, or a folder it left behind, is a load error that
    says so and names what to serve instead, never a traceback (the service keeps its selector)."""
    (tmp_path / "ce").mkdir()
    (tmp_path / "ce" / "ce_config.json").write_text('{"input_format": "ce-input/2"}')
    record = {"kind": "cross_encoder", "model_dir": str(tmp_path / "ce"), "version": "pai-selector:3"}
    for spec in (record, tmp_path / "ce", str(tmp_path / "ce")):
        with pytest.raises(SelectorLoadError, match="cross-encoder selector was retired.*serve a ranker") as e:
            resolve(spec)
        assert "\n" not in str(e.value)
    with pytest.raises(RegistryError, match="pai-selector:3: the cross-encoder selector was retired"):
        verify(record)  # `pai promote` / `pai rollback` to such a version moves nothing


def test_bad_specs_fail_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="unknown selector 'nope'"):
        resolve("nope")
    with pytest.raises(SelectorLoadError, match="ranker model not found"):
        resolve({"kind": "ranker", "model_dir": str(tmp_path / "gone"), "version": "ranker:x"})
    with pytest.raises(SelectorLoadError, match="lacks"):
        resolve({"version": "v"})  # a GGUF record without its file


def test_pai_eval_takes_a_model_path(tmp_path, make_ranker):
    """`pai eval --selector models/ranker` evaluates the folder (it used to be looked up as a registry version)."""
    folder = make_ranker(tmp_path / "ranker", {"similarity": 1.0})
    cands = [{"id": f"c{i}", "text": f"passage {i} about topic {i}", "title": None} for i in range(6)]
    item = {"qid": "q1", "query": "passage 3 about topic 3", "candidates": cands, "relevant_ids": ["c3"]}
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(item) + "\n")
    r = CliRunner().invoke(cli, ["eval", "--benchmark", str(bench), "--selector", str(folder), "--json"])
    assert r.exit_code == 0, r.output
    systems = json.loads(r.output[r.output.index("{") :])
    assert any("selector" in v["systems"] for v in systems.values()), r.output
