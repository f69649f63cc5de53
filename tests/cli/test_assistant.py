"""`pai mcp` and `pai hooks stop` (cli/assistant.py) in front of their cores: a bad transport is one line, and
the turn-end hook never fails the assistant (a transcript with no finished exchange is one line, exit 0). The
hook against a real service: tests/serving/test_transcript.py; the MCP tools: tests/serving/test_mcp_server.py."""

import json

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def test_mcp_refuses_an_unknown_transport_in_one_line():
    r = runner.invoke(app, ["mcp", "--transport", "carrier-pigeon", "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "--transport must be stdio or http, not 'carrier-pigeon'" in r.output
    assert "Traceback" not in r.output


def test_the_stop_hook_with_no_finished_exchange_says_so_and_exits_0(tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"content": "a question with no answer"}}) + "\n")
    r = runner.invoke(app, ["hooks", "stop", "--transcript", str(transcript), "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 0 and "pai hooks stop: no finished exchange in the transcript" in r.output
    r = runner.invoke(app, ["hooks", "stop", "--url", "http://127.0.0.1:9"], input='{"session_id": "s"}')
    assert r.exit_code == 0 and "hook input on stdin has no transcript_path" in r.output
