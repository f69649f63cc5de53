"""The assistant turn-end hook on a recorded (synthetic) transcript: the last exchange is captured and its
answer's [2] labels the memory query it made; hostile transcripts never fail the assistant."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from serving.client import Client
from serving.server import BackgroundServer
from serving.transcript import last_exchange

REPO = Path(__file__).resolve().parents[2]
TRANSCRIPT = REPO / "tests" / "data" / "claude_transcript.jsonl"


def test_last_exchange_of_the_recorded_transcript():
    ex = last_exchange(TRANSCRIPT)
    assert ex.user == "Where do honey bees keep their honey?"
    assert (
        ex.assistant.startswith("Let me check your notes.\nHoney bees keep their honey in wax combs")
        and "[2]" in ex.assistant
    )
    assert ex.query_ids == [1]


@pytest.mark.parametrize(
    "content",
    [
        "",
        "\x00\x00\x00",
        'not json\n[1, 2]\n"a string"\n',
        json.dumps({"type": "user", "message": {"content": 42}}) + "\n",
        json.dumps(
            {"type": "assistant", "message": {"content": [{"type": "text", "text": "an answer with no question"}]}}
        ),
        json.dumps({"type": "user", "message": {"content": "a question with no answer"}}) + "\n",
    ],
)
def test_transcripts_without_a_finished_exchange(tmp_path, content):
    p = tmp_path / "t.jsonl"
    p.write_text(content)
    assert last_exchange(p) is None


def run_hook(url: str, stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "hooks", "stop", "--url", url],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_the_stop_hook_captures_and_labels_the_log(db_url, embedder, tmp_path, first_stage_service):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "bees.md").write_text("# Bees\n\nHoney bees store nectar as honey in wax combs inside the hive.")
    (folder / "wasps.md").write_text("# Wasps\n\nWasps build paper nests from chewed wood fibre.")
    (folder / "rivers.md").write_text("# Rivers\n\nA delta forms where sediment settles at the sea.")
    with connect(db_url) as conn:
        ingest_paths(conn, [folder], IngestParams(), SearchParams(), embedder)
    with BackgroundServer(first_stage_service()) as srv, Client(srv.url) as client:
        ctx = client.context("where do honey bees keep honey")
        assert ctx.query_id == 1  # the recorded transcript's query (a fresh database numbers from 1)
        hook_input = json.dumps({"session_id": "s-1", "transcript_path": str(TRANSCRIPT), "hook_event_name": "Stop"})
        r = run_hook(srv.url, hook_input)
        assert r.returncode == 0 and "feedback 1 used [2]" in r.stderr, r.stderr
        with connect(db_url) as conn:
            used = dict(conn.execute("SELECT rank, used FROM query_candidates WHERE query_id = 1").fetchall())
            (n_captures,) = conn.execute("SELECT count(*) FROM captures").fetchone()
        assert used[2] is True and n_captures == 1
        # a hook never fails the assistant: bad input, a missing file, a dead service are one line, exit 0
        for stdin in ("", "{", json.dumps({"transcript_path": str(tmp_path / "missing.jsonl")}), "[]"):
            r = run_hook(srv.url, stdin)
            assert r.returncode == 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_hook("http://127.0.0.1:9", json.dumps({"transcript_path": str(TRANSCRIPT)}))
    assert r.returncode == 0 and "Traceback" not in r.stderr and "capture None" in r.stderr


def test_only_the_context_tools_results_name_query_ids(tmp_path):
    """A grep or a file read that prints `query_id: 42` must not send this answer as feedback to query 42."""
    turns = [
        {"type": "user", "message": {"content": "what did we decide about retries?"}},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "grep -r query_id logs/"}},
                    {"type": "tool_use", "id": "t2", "name": "mcp__pai-brain__context", "input": {"query": "retries"}},
                ]
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "query_id: 42\nquery_id: 43"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": [{"type": "text", "text": "query_id: 7\n\n[1] a"}],
                    },
                    {"type": "tool_result", "tool_use_id": "t9", "content": "query_id: 99"},
                ]
            },
        },
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Three retries with backoff [1]."}]}},
    ]
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps(t) for t in turns))
    assert last_exchange(p).query_ids == [7]
