"""What past questions like a new one cited, read from the log's tables for the service (the learned ranker's
`recalled` feature; its definition, and the same read from a pulled log for training and evaluation:
`retrieval.contracts.recalled`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg

from ..contracts.recalled import RECALL_FLOOR, RECALL_NEIGHBOURS, Evidence

# the nearest logged queries read to find RECALL_NEIGHBOURS distinct questions: a question asked many times fills
# many rows
_ROWS = 8 * RECALL_NEIGHBOURS

_EVIDENCE_SQL = """
WITH near AS MATERIALIZED (
    SELECT id, text, rating, embedding <=> %(v)s::halfvec AS d FROM queries
    WHERE embedding IS NOT NULL AND scope = ANY(%(scopes)s) AND text <> %(text)s
    ORDER BY d LIMIT %(rows)s
), asked AS (
    SELECT text, count(*) AS n, min(d) AS d FROM near WHERE d <= %(max_d)s GROUP BY text ORDER BY min(d) LIMIT %(texts)s
)
SELECT qc.chunk_id, 1 - a.d, count(*)::float8 / a.n
FROM asked a JOIN near q ON q.text = a.text JOIN query_candidates qc ON qc.query_id = q.id
WHERE qc.used AND q.rating IS DISTINCT FROM -1 AND qc.chunk_id = ANY(%(ids)s)
GROUP BY qc.chunk_id, a.text, a.d, a.n
"""


def evidence(
    conn: psycopg.Connection, text: str, qvec: np.ndarray, chunk_ids: Sequence[int], scopes: list[str]
) -> dict[int, Evidence]:
    """chunk id -> its evidence for the query `text` (vector `qvec`): (similarity, share) of each of the
    RECALL_NEIGHBOURS questions of `scopes` nearest to it (at least RECALL_FLOOR alike, its own text left out) whose
    answers cited the chunk, share = the part of that question's askings that cited it, a query rated -1 citing
    nothing (`retrieval.contracts.recalled.cited`). Chunks without evidence are left out."""
    if not len(chunk_ids) or not scopes:
        return {}
    args = {
        "v": np.asarray(qvec, dtype=np.float32),
        "scopes": list(scopes),
        "text": text,
        "rows": _ROWS,
        "max_d": 1.0 - RECALL_FLOOR,
        "texts": RECALL_NEIGHBOURS,
        "ids": list(chunk_ids),
    }
    out: dict[int, list[tuple[float, float]]] = {}
    with conn.transaction():  # the scope filter: keep scanning the index until the rows are found
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        for chunk_id, sim, share in conn.execute(_EVIDENCE_SQL, args):
            out.setdefault(chunk_id, []).append((float(sim), float(share)))
    return {c: tuple(sorted(ev, reverse=True)) for c, ev in out.items()}
