"""Maintenance (`pai maintain`, and `pai serve` every maintain.interval_minutes): garbage collection,
usage weights, database health. Idempotent: a second run finds nothing to do. A dry run counts
what a real run would change and changes nothing. One run at a time across processes (an advisory
lock); a run that finds it held is skipped, cleanly.

1. documents of files that no longer exist (not when most stored files are missing: an unmounted
   disk, or a service on another machine, must not empty the store)
2. documents superseded by a newer one (`documents.superseded_by`)
3. rows pointing to missing rows (kept out by foreign keys; a restore or replication with triggers
   off can still leave them) and chunks missing their full-text row (re-made)
4. feedback older than its retention *and* already pulled by the training pipeline (its watermark)
5. staging files older than their retention
6. usage weights recomputed from the feedback log
7. VACUUM (ANALYZE) / ANALYZE where rows changed a lot; HNSW recall re-checked after growth
8. documents scrubbed under an older scrubber (`retrieval.scrub.version()`: a rule added or a rule set
   upgraded) re-scrubbed, `maintain.rescrub_batch` per run, so a secret stored before a rule existed goes
   (retrieval/ops/rescrub.py)
9. expiry, first: documents without one given their params' default (`forget.expiry_*`), expired ones forgotten
   with every copy, and a forget a crash left half done finished (retrieval/ops/forget.py)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from ..corpus import expiry, store
from ..db import first_line, store_id
from ..logs.feedback_records import pulled_through
from ..params import ForgetParams, MaintainParams, SearchParams
from ..query import staging
from . import forget, forget_files, health, usage
from .rescrub import rescrub

LOCK_ID = 0x7A1B_0002  # one maintenance run at a time (migrations hold 0x7A1B_0001)


@dataclass
class MaintainReport:
    dry_run: bool
    skipped: str | None = None  # why nothing ran (another run holds the lock)
    files_gone: int = 0
    documents_deleted: int = 0  # of files gone
    superseded_deleted: int = 0  # documents
    chunks_deleted: int = 0  # of both
    orphans: dict[str, int] = field(default_factory=dict)
    feedback_deleted: int = 0  # queries (with their candidates)
    feedback_kept_unpulled: int = 0  # past retention, but not pulled yet
    staging_deleted: int = 0  # files
    usage: dict = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    analyzed: list[str] = field(default_factory=list)
    index_check: dict | None = None  # the recall check when one ran (or, dry, {"due": True})
    rescrub: dict = field(default_factory=dict)  # documents re-scrubbed under the current scrubber, chunks changed
    expiry: dict = field(default_factory=dict)  # documents given their default expiry; expired ones forgotten
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def run(
    conn: psycopg.Connection,
    mp: MaintainParams,
    sp: SearchParams,
    staging_dir: Path,
    dry_run: bool = False,
    fp: ForgetParams | None = None,
) -> MaintainReport:
    """One maintenance run on `conn` (autocommit; it holds the lock for the run's length); `fp`: expiry and the
    places a forget scrubs (None: no expiry step)."""
    t0 = time.perf_counter()
    report = MaintainReport(dry_run=dry_run)
    if not conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_ID,)).fetchone()[0]:
        report.skipped = "another maintenance run holds the lock"
        return report
    try:
        deleted: dict[str, int] = {}
        if fp is not None:
            report.expiry = _expiry(conn, fp, staging_dir, dry_run)
        _gone_files(conn, mp, report, dry_run)
        _superseded(conn, report, dry_run)
        deleted["documents"] = report.documents_deleted + report.superseded_deleted
        deleted["chunks"] = deleted["chunk_terms"] = report.chunks_deleted
        report.orphans = _orphans(conn, dry_run)
        deleted["queries"], deleted["query_candidates"] = _feedback(conn, mp, report, dry_run)
        report.staging_deleted = _staging(staging_dir, mp, dry_run)
        report.usage = usage.refresh(conn, mp.usage_strength, mp.usage_bound, dry_run)
        report.vacuumed, report.analyzed = health.plan_vacuum(
            health.table_stats(conn), deleted, mp.vacuum_dead_fraction
        )
        if not dry_run:
            try:
                health.vacuum(conn, report.vacuumed, report.analyzed)
            except psycopg.errors.InsufficientPrivilege as e:  # an external database, not owned by this role
                report.warnings.append(f"VACUUM/REINDEX not allowed for this role: {first_line(e)}")
        _index_check(conn, mp, sp, report, dry_run)
        report.rescrub = rescrub(conn, mp, dry_run)
        report.seconds = time.perf_counter() - t0
        if not dry_run:
            conn.execute(
                "INSERT INTO maintenance_runs (seconds, report) VALUES (%s, %s)",
                (report.seconds, Jsonb(report.as_dict())),
            )
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_ID,))
    return report


def _expiry(conn, fp: ForgetParams, staging_dir: Path, dry_run: bool) -> dict:
    """Defaults stamped, expired documents forgotten with every copy, open forgets finished."""
    if dry_run:
        (n,) = conn.execute("SELECT count(*) FROM documents WHERE expires_at <= now()").fetchone()
        return {"expired": n}
    places = forget_files.places(fp, staging_dir, store=store_id(conn))
    out = {"stamped": expiry.stamp_defaults(conn, fp), "resumed": len(forget.resume(conn, places))}
    (n,) = conn.execute("SELECT count(*) FROM documents WHERE expires_at <= now()").fetchone()
    out["forgotten"] = out["chunks"] = 0
    if n:
        done = forget.forget(conn, forget.Target(expired=True), places, confirmed=True)
        out |= {"forgotten": done.documents, "chunks": done.chunks}
    return out


def _gone_files(conn, mp: MaintainParams, report: MaintainReport, dry_run: bool) -> None:
    """Documents whose file (an absolute path; webhook notes have none) no longer exists."""
    paths = [p for (p,) in conn.execute("SELECT DISTINCT path FROM documents") if os.path.isabs(p)]
    gone = [p for p in paths if not os.path.exists(p)]
    if not gone:
        return
    if len(gone) > mp.max_gone_fraction * len(paths):
        report.warnings.append(
            f"{len(gone)} of {len(paths)} stored files are missing (over maintain.max_gone_fraction "
            f"{mp.max_gone_fraction}): an unmounted disk or another machine? none deleted; "
            "`pai ingest <folder>` removes the files gone from a folder"
        )
        return
    report.files_gone = len(gone)
    sources = [s for ss in store.sources_for_paths(conn, gone).values() for s in ss]
    if dry_run:
        report.documents_deleted, n_chunks = _count_documents(conn, "source = ANY(%s)", sources)
    else:
        report.documents_deleted, n_chunks = store.delete_sources(conn, sources)
    report.chunks_deleted += n_chunks


def _superseded(conn, report: MaintainReport, dry_run: bool) -> None:
    where = "superseded_by IS NOT NULL"
    with conn.transaction():
        n_docs, n_chunks = _count_documents(conn, where)
        if not dry_run:
            conn.execute(f"DELETE FROM documents d WHERE {where}")
    report.superseded_deleted = n_docs
    report.chunks_deleted += n_chunks


def _count_documents(conn, where: str, *args) -> tuple[int, int]:
    return conn.execute(
        f"SELECT count(*), coalesce(sum((SELECT count(*) FROM chunks c WHERE c.document_id = d.id)), 0)::bigint"
        f" FROM documents d WHERE {where}",
        args,
    ).fetchone()


# name -> (what is wrong, the fix); each `what` selects the rows the fix touches
_ORPHANS = {
    "chunk_terms_without_chunk": (
        "FROM chunk_terms t WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = t.chunk_id)",
        "DELETE FROM chunk_terms t WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = t.chunk_id)",
    ),
    "chunk_usage_without_chunk": (
        "FROM chunk_usage u WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = u.chunk_id)",
        "DELETE FROM chunk_usage u WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = u.chunk_id)",
    ),
    "chunks_without_document": (
        "FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = c.document_id)",
        "DELETE FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = c.document_id)",
    ),
    "near_links_to_missing_chunk": (
        "FROM chunks c WHERE near_chunk_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chunks n WHERE n.id = c.near_chunk_id)",
        "UPDATE chunks c SET near_chunk_id = NULL, near_score = NULL WHERE near_chunk_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM chunks n WHERE n.id = c.near_chunk_id)",
    ),
    "supersessions_of_missing_document": (
        "FROM documents d WHERE superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM documents n WHERE n.id = d.superseded_by)",
        "UPDATE documents d SET superseded_by = NULL WHERE superseded_by IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM documents n WHERE n.id = d.superseded_by)",
    ),
    "candidates_without_query": (
        "FROM query_candidates qc WHERE NOT EXISTS (SELECT 1 FROM queries q WHERE q.id = qc.query_id)",
        "DELETE FROM query_candidates qc WHERE NOT EXISTS (SELECT 1 FROM queries q WHERE q.id = qc.query_id)",
    ),
    "chunks_without_full_text": (  # invisible to keyword search: the row is re-made (ingest's trigger does the same)
        "FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM chunk_terms t WHERE t.chunk_id = c.id)",
        "INSERT INTO chunk_terms (chunk_id, tsv, scope) SELECT c.id,"
        " to_tsvector('english', left(coalesce(c.heading, '') || ' ' || c.text, 100000)), c.scope"
        " FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM chunk_terms t WHERE t.chunk_id = c.id)"
        " ON CONFLICT (chunk_id) DO NOTHING",
    ),
}


def _orphans(conn, dry_run: bool) -> dict[str, int]:
    """Foreign keys keep these at zero in normal operation: counted always, fixed unless dry."""
    out = {}
    with conn.transaction():
        for name, (what, fix) in _ORPHANS.items():
            (out[name],) = conn.execute(f"SELECT count(*) {what}").fetchone()
            if out[name] and not dry_run:
                conn.execute(fix)
    return out


def _feedback(conn, mp: MaintainParams, report: MaintainReport, dry_run: bool) -> tuple[int, int]:
    """Delete queries (and their candidates) older than the retention that the pull stage has
    exported; the rest stays. Returns (queries, candidates) deleted."""
    if mp.feedback_retention_days == 0:
        return 0, 0
    mark = pulled_through(Path(mp.feedback), store_id(conn))  # another store's export says nothing of this one's
    old = "q.updated_at < now() - make_interval(days => %(days)s)"
    # a pull of one scope (pull.scope) exported that scope's queries only
    pulled = "(q.updated_at, q.id) <= (%(at)s::timestamptz, %(id)s::bigint) AND (%(scope)s::text IS NULL OR q.scope = %(scope)s)"
    at, qid, scope = mark or (None, None, None)
    args = {"days": mp.feedback_retention_days, "at": at, "id": qid, "scope": scope}
    with conn.transaction():
        n_old, n_pulled, n_cands = conn.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {pulled}),"
            f" coalesce(sum((SELECT count(*) FROM query_candidates c WHERE c.query_id = q.id)) FILTER (WHERE {pulled}), 0)::bigint"
            f" FROM queries q WHERE {old}",
            args,
        ).fetchone()
        if n_pulled and not dry_run:
            conn.execute(f"DELETE FROM queries q WHERE {old} AND {pulled}", args)
    report.feedback_deleted, report.feedback_kept_unpulled = n_pulled, n_old - n_pulled
    return n_pulled, n_cands


def _staging(directory: Path, mp: MaintainParams, dry_run: bool) -> int:
    if mp.staging_retention_days == 0:
        return 0
    before = (datetime.now(UTC) - timedelta(days=mp.staging_retention_days)).date()
    paths = staging.expired(directory, before)
    if not dry_run:
        staging.remove(directory, paths)
    return len(paths)


def _index_check(conn, mp: MaintainParams, sp: SearchParams, report: MaintainReport, dry_run: bool) -> None:
    (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    if not health.check_due(chunks, health.last_check(conn), sp.top_k, mp.recheck_growth):
        return
    if dry_run:
        report.index_check = {"due": True, "chunks": chunks}
        return
    report.index_check = health.check_index(conn, chunks, sp.ef_search, sp.top_k, mp.recheck_queries, mp.min_recall)
    if "suggested_ef_search" in report.index_check:
        c = report.index_check
        report.warnings.append(
            f"HNSW recall@{c['k']} is {c['recall']} at ef_search {c['ef_search']} (< maintain.min_recall "
            f"{mp.min_recall}); ef_search {c['suggested_ef_search']} gives {c['suggested_recall']}: set search.ef_search"
        )
