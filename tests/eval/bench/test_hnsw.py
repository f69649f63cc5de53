"""The retrieval benchmark on a small table: it runs end to end and its pure parts are right."""

import numpy as np

from cli.terminal import progress_bar
from eval.bench.hnsw import exact_top_k, recall_vs_exact, run, top_up
from retrieval.params import EmbedParams, SearchParams


def test_exact_top_k_and_recall_literals():
    base = np.array([[1, 0], [0, 1], [0.8, 0.6]], dtype=np.float32)
    q = np.array([[1, 0]], dtype=np.float32)
    assert exact_top_k(base, q, 2).tolist() == [[0, 2]]
    assert recall_vs_exact([[0, 2]], np.array([[0, 2]])) == 1.0
    assert recall_vs_exact([[0, 1]], np.array([[0, 2]])) == 0.5


def test_top_up_keeps_real_rows_and_normalises_mixtures():
    real = np.eye(4, dtype=np.float32)
    out = top_up(real, 10)
    assert out.shape == (10, 4) and np.array_equal(out[:4], real)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert top_up(real, 3).shape == (3, 4)


def test_bench_runs_end_to_end_on_a_small_table(db_url, benchmark_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path))
    result = run(600, 10, [10, 100], SearchParams(), EmbedParams(), benchmark_dir, progress_bar, ("vector", "halfvec"))
    assert [st["storage"] for st in result["storages"]] == ["vector", "halfvec"]
    for st in result["storages"]:
        hnsw = [r for r in st["search"] if r["method"] == "hnsw"]
        exact = [r for r in st["search"] if r["method"] == "exact scan"][0]
        assert [r["ef_search"] for r in hnsw] == [10, 100]
        assert [r["scan"] for r in hnsw] == ["Index Scan", "Index Scan"] and exact["scan"] == "Seq Scan"
        # the seq scan agrees with numpy's float32 top-k (up to ties; halfvec up to its rounding)
        assert exact["recall_at_k"] >= (0.99 if st["storage"] == "vector" else 0.97)
        assert hnsw[1]["recall_at_k"] >= hnsw[0]["recall_at_k"]
        assert st["insert_rows_per_s"] > 0 and st["index_mb"] > 0 and st["table_mb"] > 0
    vec, half = result["storages"]
    assert half["table_mb"] < vec["table_mb"]  # 2 bytes a dimension instead of 4
    assert result["real_vectors"] == 600
    assert result["staging"]["candidates"] == 20
