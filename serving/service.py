"""What a request runs on, and the path a query takes through it. `Service` holds everything loaded once
at start-up (the database pool, the embedder, the picker, the params, the hot-swapper, the capture worker,
the maintenance loop). `run_query` is one query: retrieve -> pick -> log -> the response body. The keyword
side runs on its own connection while the query is embedded; the query's vector, computed for the search,
and the candidates' stored vectors reach the selector, so nothing is embedded twice. The picker's policy
chooses the context (`serving.picker.Picker.serve`): a fast selector (the ranker) answers inline; a slow one
(the LLM) is served from its cached pick for the same query, else the first-stage order while it runs in
the background (its pick is logged and cached for next time); `inline` waits for a slow one too, with a
timeout.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial

from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from retrieval.contracts.selection import PROMPT_VERSION, Pick
from retrieval.conversation.capture import CaptureParams, Extractor
from retrieval.embed import Embedder
from retrieval.logs import feedback, recall, trials
from retrieval.logs.used import used_labels
from retrieval.params import ForgetParams, IngestParams, MaintainParams, SearchParams, StagingParams, UsedParams
from retrieval.query import staging
from retrieval.query.previews import following, preview_line
from retrieval.query.search import Candidate, keyword_rankings, newer_than, search_vector
from retrieval.scopes import DEFAULT

from .capture import CaptureWorker
from .grants import Grant
from .hotswap import HotSwapper
from .maintenance import MaintenanceLoop
from .picker import Picker


@dataclass
class Service:
    """Everything a request needs, loaded once at start-up."""

    db_url: str
    embedder: Embedder
    picker: Picker
    search: SearchParams
    ingest: IngestParams
    staging: StagingParams
    inline: bool = False
    swapper: HotSwapper | None = None  # follows the announced selector version (None: pinned selector)
    host: str = "127.0.0.1"  # beyond loopback, admin routes need PAI_ADMIN_TOKEN
    pool: ConnectionPool | None = None
    keyword_workers: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(8, thread_name_prefix="keyword")
    )
    capture: CaptureParams = field(default_factory=CaptureParams)
    extractor: Extractor | None = None  # the LLM fact extractor; None: the rule splitter
    capture_worker: CaptureWorker | None = None  # started with the pool
    maintain: MaintainParams = field(default_factory=lambda: MaintainParams(interval_minutes=0))  # off unless asked
    maintenance: MaintenanceLoop | None = None  # started with the app when maintain.interval_minutes > 0
    forget: ForgetParams | None = None  # expiry and the places a forget scrubs: maintenance forgets expired memories
    # the one definition of "used" (params.yaml `used`), read into a trial's records before they are credited
    relabel: Callable[[dict], dict] = partial(used_labels, p=UsedParams())

    def ready(self, wait_s: float = 0.0) -> bool:
        """The service serves what it must: a pinned selector (loaded before the app starts) at once; one that
        follows deployments once it has caught up with them (the champion loaded, warmed, canaried)."""
        return self.swapper is None or self.swapper.wait_ready(wait_s)


@contextmanager
def in_process(service: Service, max_size: int = 4) -> Iterator[Service]:
    """The service with its connection pool open, for `run_query` called in this process (a bench, a test); its
    pool, keyword workers and picker closed after. A served one gets the same from the HTTP app's lifespan."""
    service.pool = ConnectionPool(
        service.db_url, min_size=1, max_size=max_size, open=True, kwargs={"autocommit": True}, configure=register_vector
    )
    try:
        yield service
    finally:
        service.pool.close()
        service.keyword_workers.shutdown()
        service.picker.close()


def run_query(
    service: Service,
    text: str,
    inline: bool,
    k: int | None = None,
    scope: str = DEFAULT,
    reads: list[str] | None = None,
) -> dict:
    """One query in `scope`, searching `reads` (default: `scope` alone): the response body. `k` keeps the first k
    chunks of the context: the consumer is given only those, so only those are logged as shown (the rest stay
    unlabelled, never negatives)."""
    reads = reads or [scope]
    # the keyword side needs no embedding: it runs on its own connection while the query is embedded
    keyword = service.keyword_workers.submit(_keyword_side, service, text, reads)
    qvec = service.embedder.encode([text])[0]
    with service.pool.connection() as conn:
        result = search_vector(
            conn, text, qvec, service.search, keyword.result(), usage=service.maintain.usage_prior, scopes=reads
        )
        learned = feedback.learned_answers(conn, text, scopes=reads)
        # what past questions like this one cited of each candidate: the learned ranker reads it (`recalled`)
        recalled = recall.evidence(conn, text, qvec, [c.chunk_id for c in result.above], reads)
    # what the staging file lists and the selector sees, numbered 1..N
    shown = [replace(c, recalled=recalled[c.chunk_id]) if c.chunk_id in recalled else c for c in result.above]
    served = service.picker.serve(text, shown, qvec, inline)  # the policy: fast inline, slow in the background
    chosen, version, status, context = served.chosen, served.version, served.status, served.context
    if k is not None and k < len(context):  # a chunk cut is never shown: P(shown) 0, log_query's default
        context = context[:k]
        kept = {c.rank for c in context}
        served = replace(served, propensity={r: p for r, p in served.propensity.items() if r in kept})
        if served.explored not in kept:
            served = replace(served, explored=None, replaced=None)
        # the previews follow the context as given: what k cut is not listed either (never shown, never previewed)
        cut = following(context, served.chosen, shown, len(served.previews))
        served = replace(served, previews=cut, preview_propensity={c.rank: 1.0 for c in cut})
    newer = newer_than(context)  # of two near chunks both in the context, which was written later
    sf = staging.from_result(
        result, scope=scope, context=[c.rank for c in context], previews=[c.rank for c in served.previews]
    )
    path = staging.write(sf, service.staging.path(), display_root=os.getcwd())
    with service.pool.connection() as conn:
        qid = feedback.log_query(
            conn,
            text,
            result.candidates,
            version,
            [c.rank for c in chosen],
            shown=[c.rank for c in context],
            propensity=served.propensity,
            prompt_version=PROMPT_VERSION,
            selection_status=status,
            staging_path=str(path),
            threshold=service.search.threshold,
            trial_id=served.trial,
            teams=served.teams,
            scope=scope,
            # what was listed this time, each with its chance of being listed (the policy's other candidates: not listed)
            previewed={c.rank: served.preview_propensity.get(c.rank, 1.0) for c in served.previews}
            if service.picker.previews
            else None,
            embedding=qvec,
        )
    if served.later is not None:  # the slow selector refines for next time
        service.picker.select_later(text, shown, lambda p: _log_pick(service, qid, p), served.later)
    return {
        "query_id": qid,
        "scope": scope,
        "scopes_read": reads,
        "selector_version": version,  # what chose this context ("first-stage" while a slow pick is pending)
        "active_selector": served.active,  # the selector this request ran (inline) or queued (background)
        "selection_status": status,
        "context": [_context_item(c, newer) for c in context],
        # exploration gave the context's last slot to a candidate below the cut (search.explore_rate), or null
        "exploration": {"explored_rank": served.explored, "replaced_rank": served.replaced}
        if served.explored is not None
        else None,
        # the next candidates, one line each: `POST /expand` {query_id, n} reads one whole; an [n] of them may be cited
        "previews": [_preview_item(c, service.search.preview_chars) for c in served.previews],
        "learned": [{"question": q, "answer": a, "similarity": round(s, 3)} for q, a, s in learned],
        "candidates": [
            {"rank": c.rank, "chunk_id": c.chunk_id, "source": c.source, "score": round(c.score, 4)}
            for c in result.candidates
        ],
        "below_threshold": result.below_threshold,
        "staging_file": str(path),
    }


def settle_trial(service: Service, query_id: int) -> dict | None:
    """After feedback on `query_id`: if it was served in a running trial, read the trial's rule now. The closed
    trial when this feedback decided it (a promotion is announced to every service), else None; undecided, this
    service's arm of the trial takes the evidence so far (its share of interleaved queries follows it)."""
    with service.pool.connection() as conn:
        row = conn.execute("SELECT trial_id FROM queries WHERE id = %s", (query_id,)).fetchone()
        if row is None or row[0] is None:
            return None
        trial = trials.settle(conn, row[0], service.relabel)
    if trial is None or trial.status != "running":
        return trial.as_dict() if trial else None
    arm = service.picker.trial
    if arm is not None and arm.id == trial.id:
        arm.follow(trial.evidence)
    return None


def trial_status(service: Service) -> dict | None:
    """The running trial, its evidence so far, the share of queries it interleaves now, and whether this service
    serves it; None when none runs."""
    with service.pool.connection() as conn:
        trial = trials.running(conn)
        if trial is None:
            return None
        v = trials.verdict(conn, trial, service.relabel)
    arm = service.picker.trial
    return trial.as_dict() | {
        "evidence": v.as_dict(),
        "share_now": trial.rule.share_at(v.evidence_for),
        "served_here": arm is not None and arm.id == trial.id,
    }


def scope_of(conn, table: str, row_id: int) -> str | None:
    """The scope of a query or a capture (`table`: queries | captures), or None when there is no such id."""
    sql = {"queries": "SELECT scope FROM queries WHERE id = %s", "captures": "SELECT scope FROM captures WHERE id = %s"}
    row = conn.execute(sql[table], (row_id,)).fetchone()
    return row[0] if row else None


def readable_scopes(conn, grant: Grant) -> list[str]:
    """The scopes holding anything (documents, queries, captures) that `grant` may read."""
    rows = conn.execute(
        "SELECT scope FROM documents UNION SELECT scope FROM queries UNION SELECT scope FROM captures"
    ).fetchall()
    return sorted(s for (s,) in rows if grant.may_read(s))


def _keyword_side(service: Service, text: str, reads: list[str]) -> list[list[int]]:
    with service.pool.connection() as conn:
        return keyword_rankings(conn, text, service.search, reads)


def _log_pick(service: Service, query_id: int, pick: Pick) -> None:
    with service.pool.connection() as conn:
        feedback.record_pick(conn, query_id, list(pick.ranks), pick.status, pick.version)


def expand_preview(service: Service, query_id: int, n: int, scopes: list[str]) -> dict:
    """The whole chunk of preview [n] of `query_id` (of a query in `scopes`), as a context item; logged as read."""
    with service.pool.connection() as conn:
        c = feedback.expand(conn, query_id, n, scopes)
    return {"query_id": query_id, **_context_item(c, {})}


def _preview_item(c: Candidate, chars: int) -> dict:
    return {"rank": c.rank, "chunk_id": c.chunk_id, "source": c.source, "preview": preview_line(c, chars)}


def _context_item(c: Candidate, newer: dict[int, list[int]]) -> dict:
    return {
        "rank": c.rank,
        "chunk_id": c.chunk_id,
        "source": c.source,
        "heading": c.heading,
        "start_line": c.start_line,
        "end_line": c.end_line,
        "score": round(c.score, 4),
        "date": c.date,  # when its document was written (ISO 8601, UTC)
        "newer_than": newer.get(c.rank, []),  # ranks of near chunks in this context whose documents are older
        "text": c.text,
    }
