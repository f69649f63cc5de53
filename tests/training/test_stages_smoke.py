"""pull -> build through their main() as DVC runs them, on a real feedback log, in a scratch folder."""

import json
import shutil
from pathlib import Path

import pytest

from retrieval.logs.feedback import log_query, record_feedback
from retrieval.query.search import Candidate
from training import build, pull

REPO = Path(__file__).resolve().parents[2]


def test_pull_then_build(conn, db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "params.yaml").write_text(
        (tmp_path / "params.yaml").read_text().replace("lag_seconds: 5.0", "lag_seconds: 0.0")
    )
    conn.execute("INSERT INTO documents (id, source, path, content_hash, n_chunks) VALUES (1, 'd', 'd', 'x', 4)")
    for r in range(1, 5):
        conn.execute(
            "INSERT INTO chunks (id, document_id, source, ord, start_line, end_line, text, content_hash, tokens, embedding)"
            " VALUES (%s, 1, 'd', %s, 1, 1, %s, %s, 3, %s)",
            (r, r, f"passage {r}", f"h{r}", [0.1] * 384),
        )
    chunks = [Candidate(r, r, "d", None, None, 1, 1, f"passage {r}", f"h{r}", 1 - r / 10, 3) for r in range(1, 5)]
    for i in range(40):
        qid = log_query(conn, f"question number {i}", chunks, "first-stage", threshold=0.2)
        record_feedback(conn, qid, used_chunk_ids=[1 + i % 4], rating=1)

    pull.main()
    metrics = json.loads((tmp_path / "data/feedback/metrics.json").read_text())
    assert (metrics["queries"], metrics["used"], metrics["ignored"]) == (40, 40, 120)
    build.main()
    stats = json.loads((tmp_path / "data/datasets/stats.json").read_text())
    assert stats["train_queries"] + stats["val_examples"] == 40 and stats["val_examples"] > 0
    assert stats["train_examples"] == 2 * stats["train_queries"]  # one shuffled copy each
    first = json.loads(open(tmp_path / "data/datasets/train.jsonl").readline())
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]


def test_pull_fails_loudly_on_an_empty_log(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    with pytest.raises(SystemExit, match="feedback log is empty"):
        pull.main()
