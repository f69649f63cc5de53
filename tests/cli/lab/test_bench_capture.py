"""`pai lab bench capture` end to end on a small slice of the labelled set, in a scratch database."""

import json
from pathlib import Path

from typer.testing import CliRunner

from cli.lab.bench_capture import write_labelled
from cli.main import app

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


def test_the_labelled_set_is_what_its_readme_says(benchmark_dir, tmp_path):
    out = tmp_path / "labelled.jsonl"
    assert write_labelled(benchmark_dir, REPO / "data" / "capture" / "hard.jsonl", out) == 1080
    assert out.read_text() == (REPO / "data" / "capture" / "labelled.jsonl").read_text()  # deterministic, committed


def test_bench_capture_reports_curve_gates_and_hard_cases(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)  # the scratch database is made beside it
    rows = [json.loads(line) for line in (REPO / "data" / "capture" / "labelled.jsonl").open()]
    pick = [r for r in rows if r["split"] == "stream"][:30]
    pick += [r for r in rows if r["kind"] == "durable-passage"][:4] + [r for r in rows if r["kind"] == "hard"][:6]
    pick += [r for r in rows if r["kind"] == "noise-template" and r["split"] == "eval"][:6]
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in pick))
    r = runner.invoke(
        app, ["lab", "bench", "capture", "--labelled", str(small), "--json", "--out", str(tmp_path / "o.json")]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out == json.loads((tmp_path / "o.json").read_text())
    assert [c["rejections"] for c in out["noise_curve"]][:2] == [0, 25] and out["noise_curve"][0]["noise_recall"] == 0
    assert out["noise_curve"][1]["prototypes"] > 0 and len(out["noise_sweep"]) == 9
    assert out["overall"]["durable"] == 4 + sum(r["label"] == "durable" for r in pick if r["kind"] == "hard")
    assert set(out["gates"]) == {"prefilter", "length", "noise", "quality"} and len(out["hard"]) == 6
    assert out["ms_per_capture"]["p50"] > 0 and out["counters"]["captures"] == len(pick)
