"""`pai eval` as a user runs it: every baseline side by side, as JSON; a missing benchmark file is one line."""

import json

from typer.testing import CliRunner

from cli.main import app
from eval.systems import BASELINES

runner = CliRunner()


def test_pai_eval_prints_all_baselines_as_json(tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))  # an empty registry: no champion to compare
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    items = [
        {
            "qid": str(i),
            "query": f"capital of country {i}?",
            "relevant_ids": [f"{i}a"],
            "answers": ["Paris"],
            "candidates": [
                {"id": f"{i}a", "title": "France", "text": f"Paris is the capital of country {i}."},
                {"id": f"{i}b", "title": "Rivers", "text": "Rivers flow to the sea."},
            ],
        }
        for i in range(4)
    ]
    bench = tmp_path / "b.jsonl"
    bench.write_text("".join(json.dumps(it) + "\n" for it in items))
    r = runner.invoke(app, ["eval", "--benchmark", str(bench), "--model", str(tmp_path / "none"), "--json"])
    assert r.exit_code == 0, r.output
    out = next(iter(json.loads(r.stdout).values()))
    assert set(out["systems"]) == set(BASELINES)  # every baseline of the table, none other
    assert out["systems"]["cosine"]["recall@5"] == 1.0 and out["systems"]["cosine"]["queries"] == 4
    for b in BASELINES:  # each baseline by name, alone
        one = runner.invoke(app, ["eval", "--benchmark", str(bench), "--selector", b, "--model", "none", "--json"])
        assert one.exit_code == 0, one.output
        assert list(next(iter(json.loads(one.stdout).values()))["systems"]) == [b]
    old = runner.invoke(
        app, ["eval", "--benchmark", str(bench), "--selector", "similarity", "--model", "none", "--json"]
    )
    assert list(next(iter(json.loads(old.stdout).values()))["systems"]) == ["cosine"]  # its name before issue 59
    assert old.stderr.splitlines()[0] == "pai eval --selector similarity is deprecated: say cosine"
    r = runner.invoke(app, ["eval", "--benchmark", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2 and "no such benchmark file" in r.output
