"""The replay: literal feedback building, and a small real run through the service."""

import json
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from cli.replay import ReplayQuery, feedback_for, load_queries

REPO = Path(__file__).resolve().parents[2]


def test_feedback_for_marks_relevant_candidates_used():
    response = {
        "query_id": 7,
        "candidates": [
            {"chunk_id": 1, "source": "/c.jsonl#A"},
            {"chunk_id": 2, "source": "/c.jsonl#B"},
            {"chunk_id": 3, "source": "/c.jsonl#A"},
        ],
        "context": [{"chunk_id": 2}],
    }
    assert feedback_for(response, ReplayQuery("q", "x", frozenset({"A"}))) == {
        "query_id": 7,
        "used_chunk_ids": [1, 3],
        "rating": -1,
    }
    assert feedback_for(response, ReplayQuery("q", "x", frozenset({"B"}), "yes")) == {
        "query_id": 7,
        "used_chunk_ids": [2],
        "rating": 1,
        "answer": "yes",
    }


def test_load_queries_counts(benchmark_dir):
    assert len(load_queries(benchmark_dir, "scifact", "train")) == 809
    hp = load_queries(benchmark_dir, "hotpotqa", "train")
    assert len(hp) == 300 and all(len(q.relevant) == 2 for q in hp)


def test_simulate_fills_the_feedback_log(db_url, benchmark_dir, monkeypatch, tmp_path, conn):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        app,
        [
            "simulate",
            "--dataset",
            "scifact",
            "--split",
            "train",
            "--max-queries",
            "8",
            "--corpus-limit",
            "40",
            "--benchmark-dir",
            str(benchmark_dir),
            "--params",
            str(REPO / "params.yaml"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["queries"] == 8 and summary["errors"] == 0 and summary["with_used"] >= 6
    rows = conn.execute(
        "SELECT count(DISTINCT q.id), count(*), count(c.used), count(*) FILTER (WHERE c.used)"
        " FROM queries q JOIN query_candidates c ON c.query_id = q.id"
    ).fetchone()
    assert rows[0] == 8 and rows[1] == rows[2]  # every candidate of every query is labelled used or ignored
    assert rows[3] == summary["used"]
    assert len(list((tmp_path / ".pai" / "staging").rglob("*.md"))) == 8
