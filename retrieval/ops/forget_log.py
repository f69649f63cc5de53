"""Forget's part in the query log: which logged queries a forgotten memory reached, and what of theirs goes.

Rows stay where the loop reads them (a query's other candidates keep their labels); what goes is what could hold the
forgotten text: the forgotten candidates' labels and content hashes, the answers and corrections of the queries that
showed them, the learned answers learned from those, the captures whose facts they were, and with a text target
every occurrence of the text. A query logged after its forget (its search ran just before) is found by `late`."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

FORGOTTEN = "[forgotten]"  # what stands where forgotten text was, in the log and its files


def rewrite(
    conn: psycopg.Connection,
    chunk_ids: list[int],
    text: str | None,
    scopes: list[str] | None,
    job: dict,
    asked: str,
) -> dict:
    """In the caller's transaction: the log's rows that hold the forgotten chunks (or `text`, in `scopes`; None: all)
    rewritten, and a journal row naming what the files must still lose (`job` completed with the queries). Returns
    the journal id and the counts."""
    listed, shown, mentioned = affected_queries(conn, chunk_ids, text, scopes)
    affected = sorted(set(listed) | set(mentioned))
    (first_seen,) = conn.execute("SELECT min(created_at) FROM queries WHERE id = ANY(%s)", (affected,)).fetchone()
    staging = [p for (p,) in conn.execute("SELECT staging_path FROM queries WHERE id = ANY(%s)", (affected,)) if p]
    job = job | {
        "chunk_ids": chunk_ids,
        "query_ids": affected,  # their pulled records, and any copy of them, hold it
        "trained_query_ids": sorted(set(shown) | set(mentioned)),  # their training examples hold it
        "answer_query_ids": shown,  # their answers may quote it
        "texts": [text] if text else [],
        "staging_paths": staging,
    }
    (journal_id,) = conn.execute(
        "INSERT INTO forget_journal (asked, job, first_seen) VALUES (%s, %s, %s) RETURNING id",
        (asked, Jsonb(job), first_seen),
    ).fetchone()
    unlabelled = conn.execute(
        "UPDATE query_candidates SET used = NULL, content_hash = 'forgotten' WHERE chunk_id = ANY(%s)"
        " AND content_hash <> 'forgotten'",
        (chunk_ids,),
    ).rowcount
    learned, captures = rewrite_rest(conn, shown, chunk_ids, text, scopes)
    return {
        "journal_id": journal_id,
        "candidates_unlabelled": unlabelled,
        "queries_rewritten": rewrite_queries(conn, shown, text, affected),
        "learned_answers": learned,
        "captures": captures,
    }


def late(conn: psycopg.Connection) -> list[int]:
    """Forgotten chunks that queries logged after their forget still name (their search ran just before it)."""
    return [
        i
        for (i,) in conn.execute(
            "SELECT DISTINCT c.chunk_id FROM query_candidates c WHERE c.content_hash <> 'forgotten'"
            " AND c.chunk_id IN (SELECT jsonb_array_elements_text(job->'chunk_ids')::bigint FROM forget_journal"
            " WHERE state = 'done') AND NOT EXISTS (SELECT 1 FROM chunks k WHERE k.id = c.chunk_id)"
            " ORDER BY 1"
        )
    ]


def affected_queries(
    conn: psycopg.Connection, chunk_ids: list[int], text: str | None, scopes: list[str] | None
) -> tuple[list[int], list[int], list[int]]:
    """(queries that had a forgotten chunk among their candidates, those that showed it to the consumer (in the
    context, expanded, used, or exposure unknown), queries whose own texts hold `text`)."""
    rows = conn.execute(
        "SELECT query_id, bool_or(shown IS NOT FALSE OR expanded OR used IS NOT NULL) FROM query_candidates"
        " WHERE chunk_id = ANY(%s) AND content_hash <> 'forgotten' GROUP BY query_id ORDER BY 1",
        (chunk_ids,),
    ).fetchall()
    listed, shown = [q for q, _ in rows], [q for q, s in rows if s]
    mentioned = []
    if text:
        mentioned = [
            q
            for (q,) in conn.execute(
                "SELECT id FROM queries WHERE (%(scopes)s::text[] IS NULL OR scope = ANY(%(scopes)s))"
                " AND (strpos(text, %(t)s) > 0 OR strpos(coalesce(answer, ''), %(t)s) > 0"
                " OR strpos(coalesce(correction, ''), %(t)s) > 0 OR strpos(coalesce(staging_path, ''), %(t)s) > 0)"
                " ORDER BY id",
                {"t": text, "scopes": scopes},
            )
        ]
    return listed, shown, mentioned


# a query's vector is of its text: where the text held what is forgotten, the vector goes with it
_VECTOR_OF_TEXT = "CASE WHEN strpos(text, %(t)s) > 0 THEN NULL ELSE embedding END"


def rewrite_queries(conn: psycopg.Connection, shown: list[int], text: str | None, affected: list[int]) -> int:
    """The answer and correction of a query that showed a forgotten chunk may quote it: both go (its labels are
    stored apart and stay). `text` is replaced wherever else the log holds it, and a query text that held it loses its
    vector (`recall`: later questions read no copy of it). Each row's updated_at moves, so the pull exports its new
    state."""
    n = conn.execute(
        "UPDATE queries SET answer = NULL, correction = NULL, updated_at = now() WHERE id = ANY(%s)", (shown,)
    ).rowcount
    if text:
        n += conn.execute(
            "UPDATE queries SET text = replace(text, %(t)s, %(f)s), answer = replace(answer, %(t)s, %(f)s),"
            " correction = replace(correction, %(t)s, %(f)s), staging_path = replace(staging_path, %(t)s, %(f)s),"
            f" embedding = {_VECTOR_OF_TEXT}, updated_at = now() WHERE id = ANY(%(ids)s) AND NOT id = ANY(%(shown)s)",
            {"t": text, "f": FORGOTTEN, "ids": affected, "shown": shown},
        ).rowcount
        conn.execute(
            "UPDATE queries SET text = replace(text, %(t)s, %(f)s),"
            f" staging_path = replace(staging_path, %(t)s, %(f)s), embedding = {_VECTOR_OF_TEXT} WHERE id = ANY(%(shown)s)",
            {"t": text, "f": FORGOTTEN, "shown": shown},
        )
    return n


def rewrite_rest(
    conn: psycopg.Connection, shown: list[int], chunk_ids: list[int], text: str | None, scopes: list[str] | None
) -> tuple[int, int]:
    """Learned answers learned from a query that showed it (or holding `text`) go; a capture whose facts were
    forgotten keeps its row (its status counts) with its texts replaced. Returns (learned answers, captures)."""
    in_scope = "(%(scopes)s::text[] IS NULL OR scope = ANY(%(scopes)s))"
    args = {"shown": shown, "ids": chunk_ids, "t": text or "", "f": FORGOTTEN, "scopes": scopes}
    has = "(%(t)s <> '' AND (strpos({a}, %(t)s) > 0 OR strpos({b}, %(t)s) > 0))"
    learned = conn.execute(
        f"DELETE FROM learned_qa WHERE source_query_id = ANY(%(shown)s)"
        f" OR ({in_scope} AND {has.format(a='question', b='answer')})",
        args,
    ).rowcount
    captures = conn.execute(
        f"UPDATE captures SET user_text = %(f)s, assistant_text = %(f)s, reason = NULL,"
        f" fact_ids = array(SELECT unnest(fact_ids) EXCEPT SELECT unnest(%(ids)s::bigint[]))"
        f" WHERE fact_ids && %(ids)s::bigint[] OR ({in_scope} AND {has.format(a='user_text', b='assistant_text')})",
        args,
    ).rowcount
    if text:
        conn.execute("DELETE FROM capture_noise_buffer WHERE strpos(text, %s) > 0", (text,))
    return learned, captures
