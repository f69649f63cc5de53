"""`pai lab`: the lab tools' arguments checked before anything runs, each problem one line (exit 2)."""

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def test_bad_arguments_are_one_line_before_anything_runs(tmp_path):
    r = runner.invoke(app, ["lab", "gpu-smoke", "--data", str(tmp_path), "--tokenizer", str(tmp_path), "--size", "7b"])
    assert r.exit_code == 2 and "--size is 14b or tiny; --backend is unsloth, hf4bit or hf" in r.output
