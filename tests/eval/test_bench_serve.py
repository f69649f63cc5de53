"""The service benchmark runs end to end against a real `pai serve` process."""

from pathlib import Path

from eval.bench_serve import run

REPO = Path(__file__).resolve().parents[2]


def test_bench_serve_small(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    result = run(REPO / "params.yaml", ["how do bees make honey?", "what is a compiler?"], [2], 2.0, 3)
    (row,) = result["load"]
    assert row["clients"] == 2 and row["errors"] == 0 and row["requests"] > 0
    assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
    assert result["ingest_to_searchable"]["notes"] == 3
    assert result["chunks"] == 0  # the notes came after the health check
    assert len(list((tmp_path / ".pai" / "staging").rglob("*.md"))) >= row["requests"]
