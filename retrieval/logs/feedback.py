"""The feedback log (docs/architecture.md, "Contracts" 3): a served query with its candidates, the selector's pick,
the consumer's feedback; the learned answers it plants and the log's counts. Every write is one transaction; bad
feedback is refused with a one-line FeedbackError and writes nothing. Its export is `feedback_records`."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC

import numpy as np
import psycopg

from ..query.search import Candidate
from ..scopes import DEFAULT
from ..scrub import scrub_all, scrub_text
from .citations import Recorded, read_citations, replaced_state

LEARNED_QA_MIN_SIMILARITY = 0.15  # pg_trgm similarity for a learned answer to count as related


class FeedbackError(ValueError):
    """Feedback that cannot be recorded (unknown query, chunk that was not a candidate, ...)."""


def log_query(
    conn: psycopg.Connection,
    text: str,
    candidates: list[Candidate],
    selector_version: str,
    picked: list[int] | None = None,
    *,
    shown: list[int] | None = None,
    propensity: dict[int, float] | None = None,
    prompt_version: str | None = None,
    selection_status: str = "pending",
    staging_path: str | None = None,
    threshold: float | None = None,
    trial_id: int | None = None,
    teams: dict[int, str] | None = None,
    scope: str = DEFAULT,
    previewed: dict[int, float] | None = None,
    embedding=None,
) -> int:
    """Record a served query with its candidates: `picked`, the served order (candidate ranks, best
    first); `shown`, the ranks in the context given to the consumer (None: `picked`, all of them; neither
    given: exposure unknown, stored NULL, and feedback labels every candidate as before);
    `propensity`, rank -> P(shown) under the serving policy (absent: 1 if shown, else 0); `scope`, the
    caller's scope (its feedback and the pull see it there); `previewed`, rank -> P(previewed) of the candidates
    listed after the context as previews (None: no previews, stored NULL); `embedding`, the query's vector, kept so
    later queries like it read what its answer cited (`recall.evidence`). The text is scrubbed of secrets first, as
    everything stored is, and a text the scrubber changed keeps no vector (the vector is of the text before)."""
    scrubbed = scrub_text(text)
    if scrubbed != text:
        embedding = None
    text = scrubbed
    pick = {r: i for i, r in enumerate(picked or [], start=1)}
    # exposure unknown (no served order, no context given: a caller other than the service): NULL, the old rule
    exposed = None if picked is None and shown is None else set(picked or []) if shown is None else set(shown)
    p = {
        r: None if exposed is None else (propensity or {}).get(r, 1.0 if r in exposed else 0.0)
        for r in (c.rank for c in candidates)
    }
    with conn.transaction():
        (qid,) = conn.execute(
            "INSERT INTO queries (text, selector_version, prompt_version, selection_status, staging_path, threshold,"
            " trial_id, scope, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::halfvec) RETURNING id",
            (
                text,
                selector_version,
                prompt_version,
                selection_status,
                staging_path,
                threshold,
                trial_id,
                scope,
                None if embedding is None else np.asarray(embedding, dtype=np.float32),
            ),
        ).fetchone()
        conn.execute(  # one statement for all N candidates (this is on the query path)
            "INSERT INTO query_candidates"
            " (query_id, rank, chunk_id, content_hash, score, pick_rank, served_rank, shown, propensity, team,"
            " previewed, preview_propensity)"
            " SELECT %s, r, c, h, s, p, p, e, q, t, v, vp FROM unnest(%s::int[], %s::bigint[], %s::text[], %s::real[],"
            " %s::int[], %s::bool[], %s::real[], %s::text[], %s::bool[], %s::real[]) AS u(r, c, h, s, p, e, q, t, v, vp)",
            (
                qid,
                [c.rank for c in candidates],
                [c.chunk_id for c in candidates],
                [c.content_hash for c in candidates],
                [c.score for c in candidates],
                [pick.get(c.rank) for c in candidates],
                [None if exposed is None else c.rank in exposed for c in candidates],
                [p[c.rank] for c in candidates],
                [(teams or {}).get(c.rank) for c in candidates],
                [None if previewed is None else c.rank in previewed for c in candidates],
                [None if previewed is None else previewed.get(c.rank, 0.0) for c in candidates],
            ),
        )
    return qid


def record_pick(
    conn: psycopg.Connection, query_id: int, picked: list[int], status: str, version: str | None = None
) -> None:
    """The selector's pick (candidate ranks, best first), when it arrives after the answer;
    `version` names the selector that made it."""
    with conn.transaction():
        # lock the query row first, as record_feedback does: the same lock order, no deadlock
        if conn.execute("SELECT 1 FROM queries WHERE id = %s FOR UPDATE", (query_id,)).fetchone() is None:
            raise FeedbackError(f"unknown query id {query_id}")
        (n,) = conn.execute("SELECT count(*) FROM query_candidates WHERE query_id = %s", (query_id,)).fetchone()
        bad = [r for r in picked if not 1 <= r <= n]
        if bad:
            raise FeedbackError(f"query {query_id}: picked ranks {bad} are not among its {n} candidates")
        conn.execute(  # position in the pick, NULL for the candidates not picked
            "UPDATE query_candidates SET pick_rank = array_position(%s::int[], rank) WHERE query_id = %s",
            (picked, query_id),
        )
        conn.execute(
            "UPDATE queries SET selection_status = %s, picked_by = %s, updated_at = now() WHERE id = %s",
            (status, version, query_id),
        )


def record_feedback(
    conn: psycopg.Connection,
    query_id: int,
    *,
    used_chunk_ids: list[int] | None = None,
    ignored_chunk_ids: list[int] | None = None,
    answer: str | None = None,
    rating: int | None = None,
    correction: str | None = None,
    scopes: list[str] | None = None,
) -> Recorded:
    """Mark which candidates were used (explicit chunk ids, else the `[n]` cited in `answer`); the other
    shown ones become ignored, and those never shown stay unlabelled (the consumer did not see them; rows
    logged before exposure was recorded, `shown` NULL, keep the old rule: ignored). An answer's `[n]` labels
    only a candidate that was shown (or whose exposure is unknown); one it was not shown, or no candidate, is
    reported back, never a label, and an answer whose every citation misses is not stored (it speaks of
    another context: the earlier labels stand). `used_chunk_ids` are a judge's labels, taken as given;
    `ignored_chunk_ids`: a judge who saw every candidate (a benchmark's qrels, a human grader) names
    negatives outside the context. A +1 rating promotes (query, answer) to learned Q&A; a correction
    replaces the learned answer. Feedback is the query's state, not an event log: posting the same
    again changes nothing, a new rating replaces the old one (a thumbs-up counts once per query), and the
    result says what it replaced. Answers and corrections are scrubbed of secrets: learned answers are
    shown to other users of the query's scope. A query outside `scopes` (None: any) is refused exactly as an
    unknown id is: the error says nothing of another scope's log."""
    if rating not in (None, -1, 1) or isinstance(rating, bool):
        raise FeedbackError(f"rating must be +1 or -1, not {rating!r}")
    # a blank answer or correction says nothing (it must not replace a learned answer)
    # scrubbed together: a secret found in one is redacted in the other too
    answer, correction = (
        r.text if r is not None else None
        for r in scrub_all([x if x is not None and x.strip() else None for x in (answer, correction)])
    )
    with conn.transaction():
        row = conn.execute(
            "SELECT text, rating, answer, correction, scope FROM queries"
            " WHERE id = %s AND (%s::text[] IS NULL OR scope = ANY(%s::text[])) FOR UPDATE",
            (query_id, scopes, scopes),
        ).fetchone()
        if row is None:
            raise FeedbackError(f"unknown query id {query_id}")
        question, old_rating, old_answer, old_correction, scope = row
        cands = conn.execute(
            "SELECT chunk_id, rank, CASE WHEN previewed OR expanded THEN true ELSE shown END, used"
            " FROM query_candidates WHERE query_id = %s",
            (query_id,),
        ).fetchall()  # a preview is citable: its [n] was given, and a consumer that cites it read it
        by_chunk = {chunk: rank for chunk, rank, _, _ in cands}
        unknown = [c for c in (used_chunk_ids or []) + (ignored_chunk_ids or []) if c not in by_chunk]
        if unknown:
            raise FeedbackError(f"query {query_id}: chunks {unknown} were not among its candidates")
        if set(used_chunk_ids or []) & set(ignored_chunk_ids or []):
            raise FeedbackError(f"query {query_id}: a chunk cannot be both used and ignored")
        labels_before = sorted(rank for _, rank, _, u in cands if u) if any(u is not None for *_, u in cands) else None
        out = Recorded([])
        if used_chunk_ids is not None:
            used = [by_chunk[c] for c in used_chunk_ids]
        elif answer is not None:  # the answer's citations of what the consumer was shown
            out = read_citations(answer, {rank: s for _, rank, s, _ in cands})
            used = out.used_ranks if out.answer_recorded else None
            answer = answer if out.answer_recorded else None  # another context's answer: the earlier one stands
        else:
            used = None
        if used is not None:  # ignored = shown (or read whole) and not used; the rest get no label (NULL)
            conn.execute(
                "UPDATE query_candidates SET used = CASE WHEN rank = ANY(%s) THEN true"
                " WHEN shown IS false AND NOT expanded THEN NULL ELSE false END WHERE query_id = %s",
                (used, query_id),
            )
        ignored = [by_chunk[c] for c in ignored_chunk_ids or []]
        if ignored:
            conn.execute(
                "UPDATE query_candidates SET used = false WHERE query_id = %s AND rank = ANY(%s)", (query_id, ignored)
            )
        labels_after = sorted(set((labels_before or []) if used is None else used) - set(ignored))
        out = replace(
            out,
            used_ranks=used or [],
            replaced=replaced_state(
                {"used_ranks": labels_before, "rating": old_rating, "answer": old_answer, "correction": old_correction},
                {"used_ranks": labels_after, "rating": rating, "answer": answer, "correction": correction},
            ),
        )
        # a query's thumbs-up counts in the learned answer's quality_score while it has an answer to give;
        # compared before and after this post: +1 it starts counting, -1 it stops
        counted = old_rating == 1 and bool(old_correction or old_answer)
        learned = (correction if correction is not None else old_correction) or (
            answer if answer is not None else old_answer
        )
        up = int((rating if rating is not None else old_rating) == 1 and bool(learned)) - int(counted)
        conn.execute(
            "UPDATE queries SET answer = coalesce(%s, answer), rating = coalesce(%s, rating),"
            " correction = coalesce(%s, correction), updated_at = now() WHERE id = %s",
            (answer, rating, correction, query_id),
        )
        if correction is not None or up > 0:
            conn.execute(
                """INSERT INTO learned_qa (question, answer, source_query_id, scope) VALUES (%s, %s, %s, %s)
                   ON CONFLICT (scope, (md5(question))) DO UPDATE SET
                     answer = CASE WHEN %s THEN EXCLUDED.answer ELSE learned_qa.answer END,
                     quality_score = learned_qa.quality_score + %s,
                     updated_at = now()""",
                (question, learned, query_id, scope, correction is not None, max(up, 0)),
            )
        if up < 0:  # a thumbs-up taken back; the answer it alone planted goes (a correction stays)
            conn.execute(
                "UPDATE learned_qa SET quality_score = quality_score - 1, updated_at = now()"
                " WHERE scope = %s AND md5(question) = md5(%s)",
                (scope, question),
            )
            conn.execute(
                "DELETE FROM learned_qa l WHERE scope = %s AND md5(question) = md5(%s) AND quality_score <= 0"
                " AND NOT EXISTS (SELECT 1 FROM queries q WHERE q.id = l.source_query_id AND q.correction IS NOT NULL)",
                (scope, question),
            )
    return out


def lock_query(conn: psycopg.Connection, query_id: int, scopes: list[str] | None) -> None:
    """Lock query `query_id`'s row for this transaction; one FeedbackError line where there is no such query in
    `scopes` (None: any), naming nothing of another scope."""
    row = conn.execute(
        "SELECT 1 FROM queries WHERE id = %s AND (%s::text[] IS NULL OR scope = ANY(%s::text[])) FOR UPDATE",
        (query_id, scopes, scopes),
    ).fetchone()
    if row is None:
        raise FeedbackError(f"unknown query id {query_id}")


def expand(conn: psycopg.Connection, query_id: int, rank: int, scopes: list[str] | None = None) -> Candidate:
    """The whole chunk of candidate `rank` of `query_id`, one of the previews it listed (or of its context), marked
    expanded: read whole, so not citing it is a label too (ignored). A query outside `scopes` (None: any) reads as
    unknown; a rank that query did not list, or a chunk changed or forgotten since, is one FeedbackError line that
    names nothing of another query or scope."""
    with conn.transaction():
        lock_query(conn, query_id, scopes)
        found = conn.execute(
            "SELECT c.chunk_id, c.score, ch.source, ch.heading, ch.parent_heading, ch.text, ch.start_line, ch.end_line,"
            " ch.content_hash, ch.tokens, d.written_at, c.shown, c.previewed"
            " FROM query_candidates c LEFT JOIN chunks ch ON ch.id = c.chunk_id AND ch.content_hash = c.content_hash"
            " LEFT JOIN documents d ON d.id = ch.document_id"
            " WHERE c.query_id = %s AND c.rank = %s",
            (query_id, rank),
        ).fetchone()
        chunk_id, score, source, heading, parent, text, start, end, digest, tokens, written, shown, previewed = (
            found or (None,) * 13
        )
        if not (shown or previewed):
            raise FeedbackError(
                f"query {query_id}: [{rank}] is not one of its previews (expand only the [n] it listed)"
            )
        if text is None:
            raise FeedbackError(f"query {query_id}: [{rank}] has changed or been forgotten since it was listed")
        if not shown:
            conn.execute(
                "UPDATE query_candidates SET expanded = true WHERE query_id = %s AND rank = %s", (query_id, rank)
            )
            conn.execute("UPDATE queries SET updated_at = now() WHERE id = %s", (query_id,))
    return Candidate(
        chunk_id=chunk_id,
        source=source,
        heading=heading,
        text=text,
        start_line=start,
        end_line=end,
        score=score,
        rank=rank,
        content_hash=digest,
        parent_heading=parent,
        tokens=tokens,
        date=written.astimezone(UTC).isoformat(timespec="seconds"),
    )


def learned_answers(
    conn: psycopg.Connection, query: str, limit: int = 3, scopes: list[str] | None = None
) -> list[tuple[str, str, float]]:
    """(question, answer, similarity) of learned Q&A of `scopes` (None: all) related to `query`, best first."""
    with conn.transaction():  # `%` uses the trigram index with this threshold
        conn.execute(f"SET LOCAL pg_trgm.similarity_threshold = {LEARNED_QA_MIN_SIMILARITY}")
        return conn.execute(
            "SELECT question, answer, similarity(question, %s) AS s FROM learned_qa"
            " WHERE question %% %s AND (%s::text[] IS NULL OR scope = ANY(%s::text[]))"
            " ORDER BY s DESC, quality_score DESC LIMIT %s",
            (query, query, scopes, scopes, limit),
        ).fetchall()


def counters(conn: psycopg.Connection, scopes: list[str] | None = None) -> dict[str, float]:
    """The log's counts, of the queries (and learned answers) of `scopes` (None: all)."""
    learned, queries, used, corrections, fallbacks = conn.execute(
        """WITH q AS (SELECT id, correction, selection_status FROM queries
                      WHERE %(s)s::text[] IS NULL OR scope = ANY(%(s)s::text[]))
           SELECT (SELECT count(*) FROM learned_qa WHERE %(s)s::text[] IS NULL OR scope = ANY(%(s)s::text[])),
                  (SELECT count(*) FROM q),
                  (SELECT count(*) FROM query_candidates qc JOIN q ON q.id = qc.query_id WHERE used),
                  (SELECT count(*) FROM q WHERE correction IS NOT NULL),
                  (SELECT count(*) FROM q WHERE selection_status = 'fallback')""",
        {"s": scopes},
    ).fetchone()
    return {
        "learned_qa_count": learned,
        "queries": queries,
        "use_count": used,
        "corrections": corrections,
        "fallback_rate": round(fallbacks / queries, 4) if queries else 0.0,
    }
