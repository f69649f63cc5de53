"""Forget: take a memory back out of the store, and every copy of it with it (`pai forget`, expiry).

A forget runs in two parts. `begin` selects the documents (`Target`), and in one transaction deletes them (their
chunks, vectors and full-text rows go with them), unlabels the log's candidates that were theirs, drops what the log
holds of their text (answers and corrections of the queries that showed them, learned answers, captures; with a
text target, every occurrence of the text) and writes a journal row naming what the files outside the database
must still lose. `finish` then rewrites those files (`forget_files`), marks the selectors trained on it
(`forget_marks`) and closes the journal row, keeping only the chunk ids. A crash between the two leaves an open row
that `resume` (the next forget, or maintenance) finishes: the database never holds half a document, and the files
catch up. A query whose search ran just before a forget and was logged just after is swept the same way (`sweep`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from ..contracts.passage import passage_text
from ..corpus import store
from ..embed import MODEL_ID
from ..embedding_cache import key
from . import forget_files, forget_log, forget_marks

_LOCK = 0x7A1B_0003  # one forget at a time (maintenance holds 0x7A1B_0002)
WIDE = 10  # a target of more documents than this, and more than half the store, must be confirmed


class ForgetError(ValueError):
    """A forget that did not happen: its one-line reason (nothing was changed)."""


@dataclass(frozen=True)
class Target:
    """What to forget: the documents every given field matches (an empty target matches nothing)."""

    doc_ids: tuple[int, ...] = ()
    source: str | None = None  # a document's source, or every document of a file path
    scope: str | None = None
    since: datetime | None = None  # written at or after
    until: datetime | None = None  # written before
    text: str | None = None  # every memory holding this text, and every occurrence of it in the log
    expired: bool = False  # documents past their expires_at

    def empty(self) -> bool:
        return not (self.doc_ids or self.source or self.scope or self.since or self.until or self.text or self.expired)

    def describe(self) -> str:
        """One line naming the target, without the forgotten text itself (it goes in the journal)."""
        parts = [f"documents {', '.join(map(str, self.doc_ids))}"] if self.doc_ids else []
        parts += [f"source {self.source}"] if self.source else []
        parts += [f"scope {self.scope}"] if self.scope else []
        parts += [f"since {self.since.isoformat()}"] if self.since else []
        parts += [f"until {self.until.isoformat()}"] if self.until else []
        parts += [f"a text of {len(self.text)} characters"] if self.text else []
        parts += ["expired"] if self.expired else []
        return "; ".join(parts)


@dataclass
class ForgetReport:
    journal_id: int
    documents: int = 0
    chunks: int = 0
    candidates_unlabelled: int = 0  # log rows of forgotten chunks: their label dropped
    queries_rewritten: int = 0  # queries whose text, answer or correction held it
    learned_answers: int = 0
    captures: int = 0
    files: dict[str, int] = field(default_factory=dict)  # place -> files rewritten or removed (vectors: deleted)
    selectors_marked: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def _where(target: Target) -> tuple[str, dict]:
    conds, args = [], {}
    if target.doc_ids:
        conds.append("d.id = ANY(%(ids)s)")
        args["ids"] = list(target.doc_ids)
    if target.source:
        conds.append("(d.source = %(source)s OR d.path = %(source)s)")
        args["source"] = target.source
    if target.scope:
        conds.append("d.scope = %(scope)s")
        args["scope"] = target.scope
    if target.since:
        conds.append("d.written_at >= %(since)s")
        args["since"] = target.since
    if target.until:
        conds.append("d.written_at < %(until)s")
        args["until"] = target.until
    if target.text:
        conds.append(
            "EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id"
            " AND strpos(coalesce(c.parent_heading, '') || coalesce(c.heading, '') || c.text, %(text)s) > 0)"
        )
        args["text"] = target.text
    if target.expired:
        conds.append("d.expires_at <= now()")
    return " AND ".join(conds), args


def check_target(target: Target) -> None:
    """ForgetError when a target cannot be run as given (empty, a NUL, an empty text, a reversed range)."""
    if target.text is not None and not target.text.strip():
        raise ForgetError("--text is empty: it would match every memory")
    if target.empty():
        raise ForgetError("say what to forget: --doc ID, --source PATH, --scope NAME, --since/--until or --text TEXT")
    for name, value in (("source", target.source), ("text", target.text), ("scope", target.scope)):
        if value and "\0" in value:
            raise ForgetError(f"--{name} holds a NUL character: no memory can hold it")
    if target.since and target.until and target.since >= target.until:
        raise ForgetError("--since must be before --until")


def select(
    conn: psycopg.Connection, target: Target, may_write: Callable[[str], bool] | None = None
) -> list[tuple[int, str, str]]:
    """(id, scope, source) of the documents `target` matches, locked FOR UPDATE when in a transaction; ForgetError
    for an id or source that matches none, or a document in a scope `may_write` refuses (a token's)."""
    check_target(target)
    if target.scope and may_write is not None and not may_write(target.scope):
        raise ForgetError(f"scope {target.scope!r} is not yours to write: nothing forgotten")
    where, args = _where(target)
    rows = conn.execute(f"SELECT d.id, d.scope, d.source FROM documents d WHERE {where} ORDER BY d.id", args).fetchall()
    missing = sorted(set(target.doc_ids) - {r[0] for r in rows})
    if missing and not target.text:
        raise ForgetError(f"no document {', '.join(map(str, missing))}: nothing forgotten")
    if target.source and not rows:
        raise ForgetError(f"no document with source or path {target.source!r}: nothing forgotten")
    refused = sorted({s for _, s, _ in rows if may_write is not None and not may_write(s)})
    if refused and (target.doc_ids or target.source):
        raise ForgetError(f"scope {refused[0]!r} is not yours to write: nothing forgotten")
    return [r for r in rows if may_write is None or may_write(r[1])]


def begin(
    conn: psycopg.Connection,
    target: Target,
    may_write: Callable[[str], bool] | None = None,
    confirmed: bool = False,
) -> ForgetReport:
    """The database's part, in one transaction: the documents and what the log holds of them go, a journal row says
    what the files must lose. ForgetError (nothing changed) for a bad target, or one as wide as the store unconfirmed."""
    report = ForgetReport(journal_id=0)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        docs = select(conn, target, may_write)
        if not docs and not target.text:
            raise ForgetError(f"no document matches {target.describe()}: nothing forgotten")
        (total,) = conn.execute("SELECT count(*) FROM documents").fetchone()
        if not confirmed and len(docs) > 1 and (len(docs) == total or (len(docs) > WIDE and 2 * len(docs) > total)):
            raise ForgetError(f"this matches {len(docs)} of the store's {total} documents: add --yes to forget them")
        store.lock_sources(conn, [s for _, _, s in docs])
        ids = [d for d, _, _ in docs]
        chunks = conn.execute(
            "SELECT id, content_hash, parent_heading, heading, text FROM chunks WHERE document_id = ANY(%s)", (ids,)
        ).fetchall()
        retired = conn.execute("SELECT chunk_id FROM retired_chunks WHERE document_id = ANY(%s)", (ids,)).fetchall()
        chunk_ids = [c[0] for c in chunks] + [c for (c,) in retired]  # earlier versions' chunks: the log names them
        scopes = None if may_write is None else sorted({s for _, s, _ in docs} | _writable(conn, may_write))
        job = {
            "cache_keys": sorted({key(MODEL_ID, passage_text(h, t, p)).hex() for _, _, p, h, t in chunks}),
            "global_texts": may_write is None,  # a text is removed from every file only by the store's owner
        }
        done = forget_log.rewrite(conn, chunk_ids, target.text, scopes, job, target.describe())
        report.documents = conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (ids,)).rowcount
        report.chunks = len(chunks)
        for k, v in done.items():
            setattr(report, k, v)
    return report


def _writable(conn: psycopg.Connection, may_write: Callable[[str], bool]) -> set[str]:
    """The scopes holding any row that `may_write` allows (a text target's log rewrite stays inside them)."""
    rows = conn.execute("SELECT scope FROM documents UNION SELECT scope FROM queries").fetchall()
    return {s for (s,) in rows if may_write(s)}


def finish(
    conn: psycopg.Connection,
    journal_id: int,
    places: list[forget_files.Place],
    mark: Callable[[datetime], list[str]] | None = forget_marks.mark,
    progress: Callable[[str], None] | None = None,
) -> ForgetReport:
    """The files' part of an open journal row (idempotent: a file already rewritten is left as is), the selectors
    trained since its data was first logged marked, the row closed and emptied. Returns the files' counts."""
    row = conn.execute("SELECT job, first_seen, state FROM forget_journal WHERE id = %s", (journal_id,)).fetchone()
    if row is None:
        raise ForgetError(f"no forget {journal_id} in the journal")
    job, first_seen, state = row
    report = ForgetReport(journal_id=journal_id)
    if state == "done":
        return report
    report.files, renamed = forget_files.scrub(places, forget_files.Job.of(job), progress)
    for old, new in renamed.items():
        conn.execute("UPDATE queries SET staging_path = %s WHERE staging_path = %s", (new, old))
    if first_seen is not None and mark is not None:
        try:
            report.selectors_marked = mark(first_seen)
        except Exception as e:  # noqa: BLE001 - MLflow down: the forget stands; the marks are said to be missing
            report.warnings.append(f"selectors not marked (MLflow: {str(e).splitlines()[0][:200]})")
    conn.execute(  # the chunk ids stay (no text): a query logged after the forget is found by them (`sweep`)
        "UPDATE forget_journal SET state = 'done', job = jsonb_build_object('chunk_ids', job->'chunk_ids'),"
        " report = %s, finished_at = clock_timestamp() WHERE id = %s",
        (Jsonb({"files": report.files, "selectors_marked": report.selectors_marked}), journal_id),
    )
    return report


def resume(
    conn: psycopg.Connection,
    places: list[forget_files.Place],
    mark: Callable[[datetime], list[str]] | None = forget_marks.mark,
) -> list[ForgetReport]:
    """Finish every forget a crash left open, oldest first; then forget what queries logged after their forget
    still hold (`sweep`)."""
    ids = [i for (i,) in conn.execute("SELECT id FROM forget_journal WHERE state <> 'done' ORDER BY id")]
    done = [finish(conn, i, places, mark) for i in ids]
    late = sweep(conn)
    return done + ([finish(conn, late.journal_id, places, mark)] if late else [])


def sweep(conn: psycopg.Connection) -> ForgetReport | None:
    """A query whose search ran just before a forget and was logged just after names a forgotten chunk (its staging
    file holds the text): its log rows rewritten as the forget's were, and a journal row for its files (None: none)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        chunk_ids = forget_log.late(conn)
        if not chunk_ids:
            return None
        report = ForgetReport(journal_id=0)
        job = {"cache_keys": [], "global_texts": True}
        for k, v in forget_log.rewrite(conn, chunk_ids, None, None, job, "queries logged after their forget").items():
            setattr(report, k, v)
    return report


def forget(
    conn: psycopg.Connection,
    target: Target,
    places: list[forget_files.Place],
    *,
    may_write: Callable[[str], bool] | None = None,
    confirmed: bool = False,
    mark: Callable[[datetime], list[str]] | None = forget_marks.mark,
    progress: Callable[[str], None] | None = None,
) -> ForgetReport:
    """Forget what `target` matches, every copy of it: the database in one transaction, then the files in `places`
    (`forget_files.places`), then the selectors trained on it marked. `may_write(scope)` is a caller's right to a
    scope (a token's; None: the store's owner). Open forgets left by a crash are finished first."""
    t0 = time.perf_counter()
    resume(conn, places, mark)
    report = begin(conn, target, may_write, confirmed)
    done = finish(conn, report.journal_id, places, mark, progress)
    report.files, report.selectors_marked, report.warnings = done.files, done.selectors_marked, done.warnings
    report.seconds = time.perf_counter() - t0
    return report
