"""The retrieval service: decode request -> retrieve -> pick -> log -> encode response.

The picker's policy chooses the context (`serving.picker.Picker.serve`): a fast selector (the ranker)
answers inline; a slow one (the LLM) is served from its cached pick for the same query, else the
first-stage order while it runs in the background (its pick is logged and cached for next time);
`inline` waits for a slow one too, with a timeout. The query's vector, computed for the search, and the
candidates' stored vectors reach the selector: nothing is embedded twice.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Literal

import psycopg
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from retrieval import capture, deployments, feedback, staging
from retrieval.capture import CaptureInputError, CaptureParams, Extractor, parse_exchange
from retrieval.db import DatabaseError, connect
from retrieval.embed import Embedder
from retrieval.ingest import ingest_documents, scrub_names
from retrieval.params import IngestParams, MaintainParams, SearchParams, StagingParams
from retrieval.search import Candidate, keyword_rankings, search_vector
from retrieval.selection import PROMPT_VERSION, Pick
from retrieval.sources import Document, text_problem

from .capture import CaptureWorker
from .hotswap import HotSwapper
from .maintenance import MaintenanceLoop
from .picker import Picker

MAX_BODY_BYTES = 2_000_000
MAX_ID = 2**63 - 1  # ids are bigint
ADMIN_TOKEN, WRITE_TOKEN, READ_TOKEN = "PAI_ADMIN_TOKEN", "PAI_WRITE_TOKEN", "PAI_READ_TOKEN"
OPEN_PATHS = frozenset({"/health"})
READY_WAIT_S = 5.0  # how long a /query waits for the champion to load before a 503 "loading"  # beyond loopback, the only route without a token


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str) -> None:
    """Beyond loopback every route but /health needs a token: refuse to serve there without one."""
    if not is_loopback(host) and not any(os.environ.get(t) for t in (READ_TOKEN, WRITE_TOKEN, ADMIN_TOKEN)):
        raise ValueError(
            f"listening on {host}, beyond loopback, needs {READ_TOKEN}, {WRITE_TOKEN} or {ADMIN_TOKEN} set: "
            "anyone who can reach it could otherwise read the whole memory, ingest notes and post feedback"
        )


class TokenGate:
    """Beyond loopback every route but /health needs a bearer token: the read token, or the write or admin one
    (a read of a memory layer is the leak). The write and admin routes check their own token after this."""

    def __init__(self, app, service: Service):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or is_loopback(self.service.host):
            return await self.app(scope, receive, send)
        tokens = [t for t in (os.environ.get(n) for n in (READ_TOKEN, WRITE_TOKEN, ADMIN_TOKEN)) if t]
        if not tokens:  # check_exposure refuses to start so; the environment changed under us
            why = (
                f"the service listens on {self.service.host}, beyond loopback, with no token: "
                f"set {READ_TOKEN}, {WRITE_TOKEN} or {ADMIN_TOKEN}"
            )
            return await JSONResponse({"error": why}, 403)(scope, receive, send)
        got = dict(scope["headers"]).get(b"authorization", b"")
        if not any(hmac.compare_digest(got, f"Bearer {t}".encode()) for t in tokens):
            why = f"missing or wrong bearer token ({READ_TOKEN}, {WRITE_TOKEN} or {ADMIN_TOKEN})"
            return await JSONResponse({"error": why}, 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        await self.app(scope, receive, send)


def _storable(value: str) -> str:
    if why := text_problem(value):
        raise ValueError(why)
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Text = Annotated[str, AfterValidator(_storable)]  # what Postgres can store: no NUL, no lone surrogate
Line = Annotated[str, AfterValidator(_storable), AfterValidator(_not_blank)]
Id = Annotated[int, Field(ge=1, le=MAX_ID)]


def _plus_minus_one(value: int) -> int:
    if value not in (-1, 1):
        raise ValueError("must be +1 or -1")
    return value


Rating = Annotated[int, Field(strict=True), AfterValidator(_plus_minus_one)]  # Literal[-1, 1] lets `true` through


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

    def ready(self, wait_s: float = 0.0) -> bool:
        """The service serves what it must: a pinned selector (loaded before the app starts) at once; one that
        follows deployments once it has caught up with them (the champion loaded, warmed, canaried)."""
        return self.swapper is None or self.swapper.wait_ready(wait_s)


class QueryIn(BaseModel):
    # strict: `true` is not 1, "4" is not 4; forbid: a misspelt field is an error, not silently dropped
    model_config = ConfigDict(strict=True, extra="forbid")
    query: Line = Field(min_length=1, max_length=4000)
    inline: bool | None = Field(None, description="wait for the selector (default: the server's --inline)")


class FeedbackIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")  # a misspelt field is an error, not lost
    query_id: Id
    used_chunk_ids: list[Id] | None = Field(
        None, max_length=1000, description="chunks the consumer used; the others it was shown were ignored"
    )
    ignored_chunk_ids: list[Id] | None = Field(
        None, max_length=1000, description="chunks judged not relevant, shown or not (a judge who saw every candidate)"
    )
    answer: Line | None = Field(None, max_length=50_000, description="final answer; [n] citations mark used candidates")
    rating: Rating | None = None
    correction: Line | None = Field(None, max_length=50_000, description="replaces the learned answer; not blank")


class IngestIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")  # a misspelt field is an error, not lost
    source: Line = Field(min_length=1, max_length=500, description="a name for the note, unique per note")
    text: Line = Field(min_length=1, max_length=MAX_BODY_BYTES)
    kind: Literal["markdown", "text", "code"] = "markdown"
    title: Text | None = Field(None, max_length=500)


class CaptureIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    user: Text = Field(max_length=MAX_BODY_BYTES, description="the user's turn")
    assistant: Line = Field(max_length=MAX_BODY_BYTES, description="the assistant's answer, where facts come from")
    source: Text | None = Field(None, max_length=500, description="who sends it (a client name)")
    session: Text | None = Field(None, max_length=500, description="the conversation it belongs to")


class BodyLimit:
    """413 for a body over `limit` bytes: by its Content-Length, or counted as it arrives (a chunked
    body has none)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        size = dict(scope["headers"]).get(b"content-length", b"")
        if size.isdigit() and int(size) > self.limit:
            response = JSONResponse(
                {"error": f"body of {int(size):,} bytes is over the {self.limit:,}-byte limit"}, 413
            )
            return await response(scope, receive, send)
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:  # FastAPI passes an HTTPException through its body parsing
                raise HTTPException(413, f"body is over the {self.limit:,}-byte limit")
            return message

        await self.app(scope, counted, send)


def create_app(service: Service) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        connect(service.db_url).close()  # migrations, once
        service.pool = ConnectionPool(
            service.db_url,
            min_size=4,
            max_size=16,
            open=True,
            kwargs={"autocommit": True},
            configure=register_vector,
        )
        service.embedder.encode(["warm up"])
        service.capture_worker = CaptureWorker(
            service.pool, service.capture, service.ingest, service.search, service.embedder, service.extractor
        )
        service.capture_worker.resume()  # exchanges a stop or crash left pending
        if service.swapper is not None:
            service.swapper.start()
        service.maintenance = MaintenanceLoop(service.db_url, service.maintain, service.search, service.staging.path())
        service.maintenance.start()
        yield
        service.maintenance.stop()
        if service.swapper is not None:
            service.swapper.stop()
        service.picker.close()
        service.keyword_workers.shutdown()
        service.capture_worker.stop()
        service.pool.close()

    app = FastAPI(title="pai-brain retrieval service", version="0.1.0", lifespan=lifespan)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(TokenGate, service=service)  # added last: runs first, before a body is read

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if any(e.get("type") in ("json_invalid", "model_attributes_type") for e in errors):
            return JSONResponse({"error": "body is not a valid UTF-8 JSON object"}, 400)
        first = errors[0]
        where = ".".join(str(p) for p in first.get("loc", [])[1:]) or "body"
        return JSONResponse({"error": f"{where}: {first.get('msg')}"}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        detail = str(exc.detail)
        if exc.status_code == 400 and "parsing the body" in detail:  # undecodable bytes
            detail = "body is not a valid UTF-8 JSON object"
        return JSONResponse({"error": detail}, exc.status_code)

    @app.exception_handler(feedback.FeedbackError)
    async def bad_feedback(request: Request, exc: feedback.FeedbackError):
        return JSONResponse({"error": str(exc)}, 404 if "unknown query id" in str(exc) else 422)

    @app.exception_handler(psycopg.OperationalError)
    @app.exception_handler(DatabaseError)
    async def db_down(request: Request, exc: Exception):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return JSONResponse({"error": f"database: {first}"}, 503)

    @app.get("/health")
    def health() -> JSONResponse:
        """Readiness: 200 "ok" once the selector the service must run is loaded and warmed; 503 "loading"
        before (a probe, the containers' healthcheck, waits); 503 with the error when the database is down."""
        with service.pool.connection() as conn:
            (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
        ready = service.ready()
        out = {
            "status": "ok" if ready else "loading",
            "chunks": chunks,
            "selector": service.picker.selector.version,
            "prompt_version": PROMPT_VERSION,
        }
        if service.swapper is not None and service.swapper.last_error and is_loopback(service.host):
            out["last_error"] = service.swapper.last_error  # beyond loopback /health is open: no internals
        return JSONResponse(out, 200 if ready else 503)

    def require_admin(request: Request) -> None:
        token = os.environ.get(ADMIN_TOKEN)
        if token:
            if not _bearer_is(request, token):
                raise StarletteHTTPException(401, "admin route: missing or wrong bearer token (PAI_ADMIN_TOKEN)")
        elif not is_loopback(service.host):
            raise StarletteHTTPException(
                403, f"admin routes are off: the service listens on {service.host}; set PAI_ADMIN_TOKEN"
            )

    def require_writer(request: Request) -> None:
        """Writes (ingest, feedback): open on loopback; beyond it, PAI_WRITE_TOKEN or PAI_ADMIN_TOKEN."""
        if is_loopback(service.host):
            return
        tokens = [t for t in (os.environ.get(WRITE_TOKEN), os.environ.get(ADMIN_TOKEN)) if t]
        if not tokens:  # check_exposure refuses to start so; the environment changed under us
            raise StarletteHTTPException(
                403, f"writes are off: the service listens on {service.host}; set {WRITE_TOKEN}"
            )
        if not any(_bearer_is(request, t) for t in tokens):
            raise StarletteHTTPException(
                401, f"write route: missing or wrong bearer token ({WRITE_TOKEN} or {ADMIN_TOKEN})"
            )

    @app.get("/selector")
    def get_selector() -> dict:
        """The selector serving now and, when the service follows deployments, the latest ones."""
        out = {"version": service.picker.selector.version, "follows_deployments": service.swapper is not None}
        if service.swapper is not None:
            out.update(service.swapper.status())
            with service.pool.connection() as conn:
                out["deployments"] = [
                    {
                        "id": d.id,
                        "version": d.version,
                        "action": d.action,
                        "reason": d.reason,
                        "created_at": d.created_at.isoformat(),
                        "applies": deployments.applies(conn, d.id),
                    }
                    for d in deployments.deployments(conn, 5)
                ]
        return JSONResponse(jsonable_encoder(out))

    @app.post("/selector/reload", dependencies=[Depends(require_admin)])
    def reload_selector() -> dict:
        """Re-apply the latest deployment (e.g. after a failed canary was fixed)."""
        if service.swapper is None:
            return JSONResponse({"error": "this service runs a pinned selector (pai serve --selector ...)"}, 409)
        with service.pool.connection() as conn:
            service.swapper.reload(conn)
        return {"reloading": True, **service.swapper.status()}

    @app.get("/stats")
    def stats() -> dict:
        with service.pool.connection() as conn:
            counts = feedback.counters(conn)
            counts["capture"] = capture.counters(conn)
        last = service.maintenance.last if service.maintenance else None
        return {
            **counts,
            "selector": dict(service.picker.counts),  # topped_up: picks the floor filled from the first-stage order
            "embedded_on_query_path": service.picker.embedded(),  # stays 0: selectors use the stored vectors
            "maintenance": last,
        }

    @app.post("/query")
    def query(body: QueryIn) -> JSONResponse:
        # never served by a selector it is about to replace; a bounded wait, so waiting queries cannot hold
        # every worker thread (and starve /health) while a slow champion loads
        if not service.ready(min(service.picker.timeout_s, READY_WAIT_S)):
            return JSONResponse(
                {"error": "loading: the selector is not loaded yet; retry (GET /health says when it is)"},
                503,
                headers={"Retry-After": "1"},
            )
        # a plain JSONResponse skips FastAPI's jsonable_encoder walk over 20 candidates (~1-2 ms)
        return JSONResponse(run_query(service, body.query, service.inline if body.inline is None else body.inline))

    @app.post("/feedback", dependencies=[Depends(require_writer)])
    def post_feedback(body: FeedbackIn) -> dict:
        if all(
            x is None for x in (body.used_chunk_ids, body.ignored_chunk_ids, body.answer, body.rating, body.correction)
        ):
            return JSONResponse({"error": "empty feedback: give used_chunk_ids, answer, rating or correction"}, 422)
        with service.pool.connection() as conn:
            used = feedback.record_feedback(
                conn,
                body.query_id,
                used_chunk_ids=body.used_chunk_ids,
                ignored_chunk_ids=body.ignored_chunk_ids,
                answer=body.answer,
                rating=body.rating,
                correction=body.correction,
            )
        return {"query_id": body.query_id, "used_ranks": used}

    @app.post("/ingest", dependencies=[Depends(require_writer)])
    def ingest(body: IngestIn) -> dict:
        doc = scrub_names(
            Document(f"webhook:{body.source}", "webhook:", body.text.replace("\r\n", "\n"), body.kind, body.title)
        )
        if doc.source != f"webhook:{body.source}":  # two names differing only in a secret would overwrite each other
            return JSONResponse({"error": "source: holds a secret; name the note without it"}, 422)
        with service.pool.connection() as conn:
            report = ingest_documents(conn, [doc], service.ingest, service.search, service.embedder)
        if report.errors:
            return JSONResponse({"error": report.errors[0]}, 422)
        return {
            "source": doc.source,
            "chunks_inserted": report.chunks_inserted,
            "chunks_kept": report.chunks_kept,
            "duplicates_skipped": report.duplicates_skipped,
            "redactions": dict(report.redactions),
            "seconds": round(report.seconds, 4),
        }

    @app.post("/capture", status_code=202, dependencies=[Depends(require_writer)])
    def post_capture(body: CaptureIn) -> JSONResponse:
        """Queue an exchange for capture; 202 with its id, `GET /capture/{id}` says what became of it."""
        try:
            ex = parse_exchange(body.model_dump(), service.capture.max_chars)
        except CaptureInputError as e:
            return JSONResponse({"error": str(e)}, e.status)
        with service.pool.connection() as conn:
            if capture.pending_count(conn) >= service.capture.max_pending:
                return JSONResponse({"error": f"{service.capture.max_pending} captures pending: try later"}, 429)
            cid = capture.submit(conn, ex)
        service.capture_worker.submit(cid)
        return JSONResponse({"id": cid, "status": "pending", "url": f"/capture/{cid}"}, 202)

    @app.get("/capture/{capture_id}")
    def get_capture(capture_id: Annotated[int, PathParam(ge=1, le=MAX_ID)]) -> JSONResponse:
        """status (pending, stored, duplicate, rejected, failed), the gate and rule or model that
        decided, the stored facts' chunk ids."""
        with service.pool.connection() as conn:
            r = capture.result(conn, capture_id)
        if r is None:
            return JSONResponse({"error": f"unknown capture id {capture_id}"}, 404)
        return JSONResponse(r.as_dict())

    return app


def run_query(service: Service, text: str, inline: bool) -> dict:
    # the keyword side needs no embedding: it runs on its own connection while the query is embedded
    keyword = service.keyword_workers.submit(_keyword_side, service, text)
    qvec = service.embedder.encode([text])[0]
    with service.pool.connection() as conn:
        result = search_vector(conn, text, qvec, service.search, keyword.result(), usage=service.maintain.usage_prior)
        learned = feedback.learned_answers(conn, text)
    shown = result.above  # what the staging file lists and the selector sees, numbered 1..N
    served = service.picker.serve(text, shown, qvec, inline)  # the policy: fast inline, slow in the background
    chosen, version, status, context = served.chosen, served.version, served.status, served.context
    sf = staging.from_result(result)
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
        )
    if served.later is not None:  # the slow selector refines for next time
        service.picker.select_later(text, shown, lambda p: _log_pick(service, qid, p), served.later)
    return {
        "query_id": qid,
        "selector_version": version,  # what chose this context ("similarity" while a slow pick is pending)
        "active_selector": served.active,  # the selector this request ran (inline) or queued (background)
        "selection_status": status,
        "context": [_context_item(c) for c in context],
        # exploration gave the context's last slot to a candidate below the cut (search.explore_rate), or null
        "exploration": {"explored_rank": served.explored, "replaced_rank": served.replaced}
        if served.explored is not None
        else None,
        "learned": [{"question": q, "answer": a, "similarity": round(s, 3)} for q, a, s in learned],
        "candidates": [
            {"rank": c.rank, "chunk_id": c.chunk_id, "source": c.source, "score": round(c.score, 4)}
            for c in result.candidates
        ],
        "below_threshold": result.below_threshold,
        "staging_file": str(path),
    }


def _bearer_is(request: Request, token: str) -> bool:
    """Compare as bytes: a header may hold any byte (latin-1 to Starlette), a str compare raises on non-ASCII."""
    got = request.headers.get("authorization", "").encode("latin-1")
    return hmac.compare_digest(got, f"Bearer {token}".encode())


def _keyword_side(service: Service, text: str) -> list[list[int]]:
    with service.pool.connection() as conn:
        return keyword_rankings(conn, text, service.search)


def _log_pick(service: Service, query_id: int, pick: Pick) -> None:
    with service.pool.connection() as conn:
        feedback.record_pick(conn, query_id, list(pick.ranks), pick.status, pick.version)


def _context_item(c: Candidate) -> dict:
    return {
        "rank": c.rank,
        "chunk_id": c.chunk_id,
        "source": c.source,
        "heading": c.heading,
        "start_line": c.start_line,
        "end_line": c.end_line,
        "score": round(c.score, 4),
        "text": c.text,
    }
