"""The vector cache: a text is computed once per model, looked up after that, in order, across processes."""

import multiprocessing
from pathlib import Path

import numpy as np

from retrieval.embedding_cache import EmbeddingCache


def test_computed_once_then_looked_up_in_order(tmp_path):
    calls = []

    def compute(texts):
        calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    cache = EmbeddingCache(tmp_path / "v.sqlite", "m", 2)
    first = cache.encode(["a", "bbb", "a"], compute)
    assert calls == [["a", "bbb"]] and first.tolist() == [[1, 1], [3, 1], [1, 1]]
    again = EmbeddingCache(tmp_path / "v.sqlite", "m", 2).encode(["bbb", "cc", "a"], compute)  # another process, say
    assert calls[1:] == [["cc"]] and again.tolist() == [[3, 1], [2, 1], [1, 1]]
    other_model = EmbeddingCache(tmp_path / "v.sqlite", "m2", 2)
    other_model.encode(["a"], compute)
    assert calls[2:] == [["a"]]  # keyed by model too
    assert cache.encode([], compute).shape == (0, 2)
    assert cache.encode(["nul\x00 and \ud800 lone surrogate"], compute).shape == (1, 2)


def test_the_embedder_serves_cached_passages_as_computed(embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path))
    texts = ["Amylase digests starch.", "Paris is in France."]
    fresh = embedder.encode(texts)
    assert np.allclose(embedder.encode_passages(texts), fresh, atol=1e-6)
    assert np.allclose(embedder.encode_passages(texts[::-1]), fresh[::-1], atol=1e-6)
    assert (tmp_path / "embeddings.sqlite").exists()  # under $PAI_HOME


def _open_and_encode(folder, rounds, barrier, errors):
    for i in range(rounds):
        barrier.wait()
        try:
            cache = EmbeddingCache(Path(folder) / f"{i}.sqlite", "m", 2)
            cache.encode(["a"], lambda texts: np.ones((len(texts), 2), np.float32))
        except Exception as e:  # noqa: BLE001 -- every failure is reported back to the test
            errors.put(f"round {i}: {e!r}")
    errors.put(None)


def test_processes_opening_a_new_store_together_all_get_it(tmp_path):
    """Six processes open 100 fresh stores at once, one store per round. Without the lock file that
    serialises opening, switching a new store to WAL deadlocked in SQLite and a few of these 600
    openings failed with "database is locked" at once (3-6 per run, measured), as two `pai ingest`
    on a fresh machine did in CI."""
    ctx = multiprocessing.get_context("fork")
    n = 6
    barrier, errors = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_open_and_encode, args=(tmp_path, 100, barrier, errors)) for _ in range(n)]
    for p in procs:
        p.start()
    failures, done = [], 0
    while done < n:
        e = errors.get(timeout=120)
        done += e is None
        failures += [e] if e else []
    for p in procs:
        p.join(timeout=30)
    assert failures == []
