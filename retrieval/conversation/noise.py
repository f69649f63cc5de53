"""The adaptive noise gate of capture: prototypes of chatter learned from past rejections.

Every rejection (by any gate) takes the next slot of a ring buffer in Postgres; every
`rebuild_every` rejections the buffer's embeddings are clustered (k-means) and the centroids replace
the prototypes in one UPDATE of one row, so every process (service, CLI) reads the old set or the
new one, and a restart reads what was last built. Cold start: before the first rebuild there are no
prototypes and the gate passes everything (`score` is None).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import psycopg

from ..embed import DIM, Embedder

BUFFER_TEXT_CHARS = 2000  # kept per rejection: MiniLM reads ~256 word pieces anyway


@dataclass(frozen=True)
class Prototypes:
    version: int  # 0 = none built yet
    centroids: np.ndarray  # (k, DIM), L2-normalised; (0, DIM) before the first build
    examples: list[dict]  # per prototype: {"size": n, "texts": [...]}
    rejections: int  # rejections seen so far
    built_at: datetime | None

    @property
    def cold(self) -> bool:
        return len(self.centroids) == 0


def load(conn: psycopg.Connection) -> Prototypes:
    version, rejections, built_at, blob, examples = conn.execute(
        "SELECT version, rejections, built_at, centroids, examples FROM capture_noise"
    ).fetchone()
    centroids = np.frombuffer(blob, dtype=np.float32).reshape(-1, DIM) if blob else np.zeros((0, DIM), np.float32)
    return Prototypes(version, centroids, examples, rejections, built_at)


def score(protos: Prototypes, vector: np.ndarray) -> float | None:
    """Max cosine of an L2-normalised vector to the prototypes; None at cold start."""
    return None if protos.cold else float(np.max(protos.centroids @ vector))


def record_rejection(
    conn: psycopg.Connection,
    capture_id: int | None,
    gate: str,
    text: str,
    vector: np.ndarray | None,
    *,
    buffer_size: int,
    rebuild_every: int,
    k: int,
    seed: int,
    embedder: Embedder,
) -> bool:
    """Put one rejection in the ring buffer; rebuild the prototypes when it is the rebuild_every-th.
    Runs in the caller's transaction (the counter's row lock makes concurrent writers take turns);
    True when it rebuilt."""
    with conn.transaction():
        (n,) = conn.execute("UPDATE capture_noise SET rejections = rejections + 1 RETURNING rejections").fetchone()
        conn.execute(
            """INSERT INTO capture_noise_buffer (slot, capture_id, gate, text, embedding) VALUES (%s, %s, %s, %s, %s)
               ON CONFLICT (slot) DO UPDATE SET capture_id = EXCLUDED.capture_id, gate = EXCLUDED.gate,
                   text = EXCLUDED.text, embedding = EXCLUDED.embedding, added_at = now()""",
            ((n - 1) % buffer_size, capture_id, gate, text[:BUFFER_TEXT_CHARS], vector),
        )
        if n % rebuild_every:
            return False
        rebuild(conn, buffer_size=buffer_size, k=k, seed=seed, embedder=embedder)
    return True


def rebuild(conn: psycopg.Connection, *, buffer_size: int, k: int, seed: int, embedder: Embedder) -> Prototypes:
    """Embed the buffer rows that lack a vector, cluster the buffer, swap the prototypes in."""
    with conn.transaction():
        conn.execute("SELECT 1 FROM capture_noise FOR UPDATE")
        todo = conn.execute(
            "SELECT slot, text FROM capture_noise_buffer WHERE embedding IS NULL AND slot < %s", (buffer_size,)
        ).fetchall()
        if todo:
            vectors = embedder.encode([t for _, t in todo])
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE capture_noise_buffer SET embedding = %s WHERE slot = %s",
                    [(v, slot) for (slot, _), v in zip(todo, vectors)],
                )
        rows = conn.execute(
            "SELECT text, embedding::real[] FROM capture_noise_buffer WHERE slot < %s ORDER BY slot", (buffer_size,)
        ).fetchall()
        x = np.array([e for _, e in rows], dtype=np.float32)
        centroids, labels = kmeans(x, k, seed)
        examples = []
        for j, c in enumerate(centroids):
            members = np.flatnonzero(labels == j)
            nearest = members[np.argsort(-(x[members] @ c))[:3]]
            examples.append({"size": int(len(members)), "texts": [rows[i][0][:200] for i in nearest]})
        conn.execute(
            """UPDATE capture_noise SET version = version + 1, built_at = now(), centroids = %s, examples = %s""",
            (centroids.astype(np.float32).tobytes(), json.dumps(examples)),
        )
    return load(conn)


def kmeans(x: np.ndarray, k: int, seed: int, iters: int = 25) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means (cosine) with k-means++ seeding: (L2-normalised centroids, label per row).
    Fewer rows than k: one centroid per row."""
    rng = np.random.default_rng(seed)
    k = min(k, len(x))
    centers = [x[rng.integers(len(x))]]
    for _ in range(1, k):
        d = np.clip(1 - np.max(x @ np.array(centers).T, axis=1), 0, None)
        if d.sum() <= 0:
            break
        centers.append(x[rng.choice(len(x), p=d / d.sum())])
    c = np.array(centers)
    labels = np.zeros(len(x), dtype=int)
    for _ in range(iters):
        new = np.argmax(x @ c.T, axis=1)
        if _ and np.array_equal(new, labels):
            break
        labels = new
        for j in range(len(c)):
            members = x[labels == j]
            if len(members):
                m = members.mean(axis=0)
                c[j] = m / (np.linalg.norm(m) or 1.0)
    return c, labels
