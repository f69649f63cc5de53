"""Usage weights: a bounded prior per chunk from the feedback log. Chunks consumers use gain weight;
chunks shown often and never used lose it. The weights are a pure function of the log, recomputed
whole by each maintenance run (idempotent), and search only re-orders the top-k by them
(`retrieval.query.order.with_usage_prior`): never a filter.

A chunk's use rate is shrunk toward the log's (empirical Bayes, `strength` pseudo-observations),
and its weight is `bound * tanh(log(rate / base rate))`: 0 for a chunk the log knows nothing about
(a fresh document), near +bound for one used whenever shown, toward -bound for one always passed over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class Usage:
    used: int
    ignored: int
    weight: float


# Candidates shown to the consumer and labelled (used true/false), scored at or above the query's threshold,
# matched to the chunk by id *and* content hash: a chunk whose text changed starts over.
_COUNTS = """
SELECT c.id, count(*) FILTER (WHERE qc.used), count(*) FILTER (WHERE NOT qc.used)
FROM query_candidates qc
JOIN queries q ON q.id = qc.query_id
JOIN chunks c ON c.id = qc.chunk_id AND c.content_hash = qc.content_hash
WHERE qc.used IS NOT NULL AND (q.threshold IS NULL OR qc.score >= q.threshold)
GROUP BY c.id
"""


def weight(used: int, ignored: int, base_rate: float, strength: float, bound: float) -> float:
    """The bounded weight of a chunk used `used` times and passed over `ignored` times."""
    if not 0 < base_rate < 1:  # nothing or everything used: the log cannot tell chunks apart
        return 0.0
    rate = (used + strength * base_rate) / (used + ignored + strength)
    return bound * math.tanh(math.log(rate / base_rate))


def weights(counts: dict[int, tuple[int, int]], strength: float, bound: float) -> dict[int, Usage]:
    """chunk id -> Usage, from chunk id -> (used, ignored)."""
    used = sum(u for u, _ in counts.values())
    total = used + sum(i for _, i in counts.values())
    base = used / total if total else 0.0
    return {c: Usage(u, i, weight(u, i, base, strength, bound)) for c, (u, i) in counts.items()}


def from_log(conn: psycopg.Connection, strength: float, bound: float) -> dict[int, Usage]:
    return weights({c: (u, i) for c, u, i in conn.execute(_COUNTS)}, strength, bound)


def stored(conn: psycopg.Connection) -> dict[int, Usage]:
    return {c: Usage(u, i, w) for c, u, i, w in conn.execute("SELECT chunk_id, used, ignored, weight FROM chunk_usage")}


def changes(old: dict[int, Usage], new: dict[int, Usage]) -> tuple[dict[int, Usage], list[int]]:
    """(rows to write, chunk ids to drop) that turn `old` into `new`; weights equal to float32 precision match."""
    write = {
        c: u
        for c, u in new.items()
        if c not in old or (old[c].used, old[c].ignored) != (u.used, u.ignored) or abs(old[c].weight - u.weight) > 1e-6
    }
    return write, [c for c in old if c not in new]


def write(conn: psycopg.Connection, rows: dict[int, Usage], drop: list[int]) -> None:
    """Upsert `rows`, delete `drop`, in one transaction (a chunk deleted meanwhile is skipped)."""
    with conn.transaction():
        conn.execute("DELETE FROM chunk_usage WHERE chunk_id = ANY(%s)", (drop,))
        conn.execute(
            """INSERT INTO chunk_usage (chunk_id, used, ignored, weight)
               SELECT u.* FROM unnest(%s::bigint[], %s::int[], %s::int[], %s::real[]) AS u(c, used, ignored, w)
               WHERE EXISTS (SELECT 1 FROM chunks WHERE id = u.c)
               ON CONFLICT (chunk_id) DO UPDATE
               SET used = EXCLUDED.used, ignored = EXCLUDED.ignored, weight = EXCLUDED.weight, updated_at = now()""",
            (
                list(rows),
                [u.used for u in rows.values()],
                [u.ignored for u in rows.values()],
                [u.weight for u in rows.values()],
            ),
        )


def refresh(conn: psycopg.Connection, strength: float, bound: float, dry_run: bool) -> dict:
    """Recompute the weights from the log and store what changed; return the counts."""
    new = from_log(conn, strength, bound)
    rows, drop = changes(stored(conn), new)
    if not dry_run:
        write(conn, rows, drop)
    return {
        "chunks_weighted": len(new),
        "up": sum(u.weight > 0 for u in new.values()),
        "down": sum(u.weight < 0 for u in new.values()),
        "changed": len(rows),
        "dropped": len(drop),
    }
