"""A person's label on one candidate of one query (the web page's +1 / -1 beside a candidate): `used` true or
false on that candidate alone, as a judge's label (`feedback.record_feedback`'s `used_chunk_ids`), with when it
was set (migration 019). The query's `updated_at` moves, so the next pull carries the label to the loop."""

from __future__ import annotations

import psycopg

from .feedback import FeedbackError, lock_query


def rate(conn: psycopg.Connection, query_id: int, chunk_id: int, useful: bool, scopes: list[str] | None) -> int:
    """Label candidate `chunk_id` of query `query_id` (of a query in `scopes`; None: any) used or not; its rank.
    A query outside `scopes`, or a chunk that was not its candidate, is one FeedbackError line."""
    with conn.transaction():
        lock_query(conn, query_id, scopes)
        ranked = conn.execute(
            "UPDATE query_candidates SET used = %s, rated_at = now() WHERE query_id = %s AND chunk_id = %s"
            " RETURNING rank",
            (useful, query_id, chunk_id),
        ).fetchone()
        if ranked is None:
            raise FeedbackError(f"query {query_id}: chunk {chunk_id} was not among its candidates")
        conn.execute("UPDATE queries SET updated_at = now() WHERE id = %s", (query_id,))
    return ranked[0]
