"""A content-addressed store of passage vectors: sha256(model, text) -> the model's float32 vector.

The same passage is embedded at ingest, again when the feedback log trains a ranker, again when a
benchmark is evaluated, and again when the ranker serves it. The vector is a pure function of the
model and the text, so it is computed once per machine and looked up after that (SQLite, WAL: several
processes may read and write it at once). Nothing downstream can tell a cached vector from a fresh one.

Opening is serialised across processes by a lock file: two processes switching a new store to WAL at
once deadlock inside SQLite, and one of them gets "database is locked" at once, without waiting out the
busy timeout (two `pai ingest` started together on a fresh machine did; CI caught it).
"""

from __future__ import annotations

import fcntl
import hashlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np


def key(model_id: str, text: str) -> bytes:
    """The cache's key of a passage: sha256 of the model id and the text (no text is stored, only this)."""
    return hashlib.sha256(f"{model_id}\0{text}".encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    def __init__(self, path: Path, model_id: str, dim: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            self._db = sqlite3.connect(str(path), timeout=30, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self._model, self._dim = model_id, dim
        self._lock = threading.Lock()

    def _key(self, text: str) -> bytes:
        return key(self._model, text)

    def forget(self, keys: list[bytes]) -> int:
        """Delete the vectors stored under `keys` (`key(model, text)`), then VACUUM so no freed page keeps them; the
        number deleted."""
        with self._lock:
            n = sum(self._db.execute("DELETE FROM vectors WHERE key = ?", (k,)).rowcount for k in keys)
            if n:
                self._db.execute("VACUUM")
        return n

    def encode(self, texts: list[str], compute: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """Vectors of `texts` in order: stored ones looked up, the rest computed by `compute` (once each) and stored."""
        keys = [self._key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = list(dict.fromkeys(keys[i : i + 500]))
                rows = self._db.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(chunk))})", chunk
                )
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        if missing:
            vecs = compute(missing)
            new = [(self._key(t), v.astype(np.float32).tobytes()) for t, v in zip(missing, vecs)]
            with self._lock:
                self._db.executemany("INSERT OR IGNORE INTO vectors (key, vec) VALUES (?, ?)", new)
            found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in new)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.stack([found[k] for k in keys])
