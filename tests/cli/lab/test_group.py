"""`pai lab`: the lab tools' arguments checked before anything runs, each problem one line (exit 2)."""

import json

from typer.testing import CliRunner

from cli.main import app
from tests.feedback_records import candidate

runner = CliRunner()


def test_bad_arguments_are_one_line_before_anything_runs(tmp_path):
    r = runner.invoke(app, ["lab", "gpu-smoke", "--data", str(tmp_path), "--tokenizer", str(tmp_path), "--size", "7b"])
    assert r.exit_code == 2 and "--size is 14b or tiny; --backend is unsloth, hf4bit or hf" in r.output


def test_grounding_reports_what_reading_the_answers_would_change(tmp_path):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    aspirin, bees = "Aspirin lowers fever in adults.", "Bees dance to show where the flowers are."
    records = [  # [2] on chunk 1's claim (support 0); [1] quoted (1.0); chunk 2 of the last quoted uncited
        {
            "answer": "Aspirin lowers fever in adults [2].",
            "candidates": [candidate(1, False, text=aspirin), candidate(2, True, text=bees)],
        },
        {
            "answer": "Aspirin lowers fever in adults [1].",
            "candidates": [candidate(1, True, text=aspirin), candidate(2, False, text=bees)],
        },
        {
            "answer": "Bees dance to show flowers.",
            "candidates": [candidate(1, False, text=aspirin), candidate(2, False, text=bees)],
        },
        {"answer": None, "candidates": [candidate(1, None, False, text=aspirin)]},
    ]
    (tmp_path / "fb").mkdir()
    (tmp_path / "fb" / "feedback.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    params = tmp_path / "params.yaml"
    params.write_text(
        (repo / "params.yaml").read_text().replace("  min_uncited: 0.8 ", "  min_uncited: 0.7 ")  # the used section's
    )
    r = runner.invoke(app, ["lab", "grounding", "--feedback", str(tmp_path / "fb"), "--params", str(params), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["answers"], out["citations"], out["citations_judged"]) == (3, 2, 2)
    assert out["support_below"]["0.5"] == 0.5 and out["uncited_quotes_at"]["0.8"] == 1
    assert out["at_params"] == {
        "min_uncited": 0.7,  # the one uncited quote counts
        "void_thumbs_down": True,
        "uncited_quotes_used": 1,
        "thumbs_down_voided": 0,  # no query rated -1
    }
    # without --feedback: the pull stage's folder, where params.yaml puts it
    params.write_text(
        params.read_text().replace("  out: &feedback data/feedback ", f"  out: &feedback {tmp_path / 'fb'} ")
    )
    r = runner.invoke(app, ["lab", "grounding", "--params", str(params), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["answers"] == 3, r.output


def test_grounding_refuses_a_bad_log_in_one_line(tmp_path):
    fb = tmp_path / "fb"
    r = runner.invoke(app, ["lab", "grounding", "--feedback", str(fb)])
    assert r.exit_code == 2 and "feedback.jsonl" in r.output and "pull" in r.output
    fb.mkdir()
    for bad, says in (
        ('{"answer": "x"', "not JSON"),
        ('{"answer": 7, "candidates": []}', "not a feedback record"),
        ('{"answer": "a", "candidates": [{"rank": "1", "text": "t"}]}', "not a feedback record"),
        ("\x00" * 10, "not JSON"),
    ):
        (fb / "feedback.jsonl").write_text('{"answer": null, "candidates": []}\n' + bad + "\n")
        r = runner.invoke(app, ["lab", "grounding", "--feedback", str(fb)])
        assert r.exit_code == 2 and says in r.output and "feedback.jsonl:2" in r.output, (bad, r.output)
