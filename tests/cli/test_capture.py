"""`pai capture FILE|-`, `pai capture noise` and the capture line of `pai status`, against a real database."""

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from cli.lab.capture_data import noise
from cli.main import app

runner = CliRunner()
REDIS = (
    "Redis keeps its whole dataset in memory and persists it to disk with RDB snapshots or an append-only file. "
    "Memcached, unlike Redis, has no persistence at all and loses everything on restart."
)


def test_a_bad_line_is_one_error_and_the_others_go_on(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    lines = [
        json.dumps({"user": "redis?", "assistant": REDIS, "session": "s"}),
        "{not json",
        json.dumps({"user": "q", "assistant": 3}),
        json.dumps({"user": "thanks", "assistant": "You're welcome!"}),
        json.dumps({"user": "q", "assistant": "a\u0000b"}),
    ]
    f = tmp_path / "ex.jsonl"
    f.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe\n")
    r = runner.invoke(app, ["capture", str(f), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [(o["line"], o["status"], o["gate"]) for o in out] == [(1, "stored", "store"), (4, "rejected", "prefilter")]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert [e.split(":")[1].strip() for e in errors] == ["line 2", "line 3", "line 5", "line 6"]
    assert "assistant: must be a string" in r.stderr and "contains a NUL" in r.stderr and "not UTF-8" in r.stderr


def test_all_failed_is_exit_2_and_stdin_takes_one_pretty_object(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user": 1}\n[]\n')
    r = runner.invoke(app, ["capture", str(bad)])
    assert r.exit_code == 2 and "nothing captured" in r.stderr
    r = runner.invoke(app, ["capture", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2 and "missing.jsonl" in r.stderr
    r = runner.invoke(app, ["capture", "-"], input=json.dumps({"user": "q", "assistant": REDIS}, indent=2))
    assert r.exit_code == 0 and "stored: 2 fact(s) stored" in r.stderr, r.output


def test_noise_shows_the_cold_start_then_the_prototypes_and_status_counts(db_url, tmp_path, monkeypatch):
    import random

    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))  # an empty registry for `pai status`
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    r = runner.invoke(app, ["capture", "noise"])
    assert r.exit_code == 0 and "no noise prototypes yet" in r.stderr and "passes everything" in r.stderr
    chatter = tmp_path / "chatter.jsonl"
    rows = noise(random.Random(1), 40, held_out=False)  # some are stored: "The build is green now." reads as a fact
    chatter.write_text("".join(json.dumps({"user": x["user"], "assistant": x["assistant"]}) + "\n" for x in rows))
    assert runner.invoke(app, ["capture", str(chatter)]).exit_code == 0
    r = runner.invoke(app, ["capture", "noise", "--json"])
    shown = json.loads(r.stdout)
    assert shown["version"] == 1 and shown["rejections_seen"] >= 25 and shown["prototypes"][0]["texts"]
    r = runner.invoke(app, ["capture", "noise"])
    assert "noise prototypes v1" in r.stderr and "nearest rejected texts" in r.stderr
    r = runner.invoke(app, ["status", "--json"])
    assert r.exit_code == 0, r.output
    counts = json.loads(r.stdout)["capture"]
    assert counts["captures"] == 40 and sum(counts["rejected"].values()) == counts["noise_rejections_seen"]


def test_a_captured_exchange_is_served_later_naming_its_date_session_and_speakers(db_url, tmp_path, monkeypatch):
    """`pai capture` stores the exchange as its session's conversation: a later query through the service's path
    (`run_query`) serves it, its text headed by the exchange's date and time, the session and both speakers."""

    from serving.selectors import FirstStageSelector
    from serving.server import build_service
    from serving.service import in_process, run_query

    monkeypatch.setenv("DATABASE_URL", db_url)
    exchanges = [
        {
            "user": "Which bakery did Priya recommend?",
            "assistant": "Priya swears by Zuckerbrot on Oak Street for rye bread.",
            "session": "errands",
        },
        {"user": "ok", "assistant": "Noted.", "session": "errands"},
    ]
    f = tmp_path / "ex.jsonl"
    f.write_text("".join(json.dumps(e) + "\n" for e in exchanges))
    r = runner.invoke(app, ["capture", str(f), "--json"])
    assert r.exit_code == 0, r.output
    params = Path(__file__).resolve().parents[2] / "params.yaml"
    service = build_service(params, FirstStageSelector(), inline=True, staging_dir=tmp_path / "staging", db_url=db_url)
    service.picker.explore_rate = 0.0
    with in_process(service):
        body = run_query(service, "where does Priya buy rye bread?", inline=True)
    served = [c["text"] for c in body["context"] if c["source"] == "capture:session:errands"]
    assert served and "Zuckerbrot" in served[0]
    assert re.match(
        r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2} · session errands · user, assistant\]\nuser: Which bakery", served[0]
    )
