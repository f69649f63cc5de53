"""The service benchmark runs end to end against a real `pai serve` process."""

from pathlib import Path

from cli.lab.bench_serve import run

REPO = Path(__file__).resolve().parents[3]


def test_bench_serve_small_and_leaves_no_trace(db_url, monkeypatch, tmp_path, conn):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / ".pai"))
    queries = ["how do bees make honey?", "what is a compiler?", "rivers shape valleys over millennia"]
    result = run(REPO / "params.yaml", queries, [2], 2.0, 3)
    (row,) = result["load"]
    assert row["clients"] == 2 and row["errors"] == 0 and row["requests"] > 0
    assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
    assert result["ingest_to_searchable"]["notes"] == 3
    assert result["chunks"] == 0  # the notes came after the health check
    # its queries, notes and staging files are gone: benchmark traffic must not become training data
    assert conn.execute("SELECT (SELECT count(*) FROM queries), (SELECT count(*) FROM documents)").fetchone() == (0, 0)
    assert not (tmp_path / ".pai" / "staging").exists()
