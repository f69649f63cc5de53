"""The HTTP API (FastAPI): the app factory, its lifespan (migrations, the connection pool, warm-up, the
capture worker, hot-swap and maintenance started and stopped), the body-size limit, how errors become
`{"error": ...}` responses, and the ten routes (and the web page's, `serving.ui`). Each route decodes its body (`serving.schemas`), is
checked for its caller (`serving.auth`) and calls into the `Service` (`serving.service`), where the query
path and its policy live: decode request -> retrieve -> pick -> log -> encode response.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Annotated

import psycopg
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool
from starlette.exceptions import HTTPException as StarletteHTTPException

from retrieval.contracts.selection import PROMPT_VERSION
from retrieval.conversation import capture, intake
from retrieval.conversation.intake import CaptureInputError, parse_exchange
from retrieval.corpus import runs as ingest_runs
from retrieval.corpus.ingest import ingest_documents, scrub_names
from retrieval.corpus.sources import Document
from retrieval.db import DatabaseError, connect
from retrieval.logs import deployments, feedback

from .auth import TokenGate, admin_only, caller, is_loopback, writers_only
from .capture import CaptureWorker
from .grants import Grant
from .maintenance import MaintenanceLoop
from .schemas import MAX_BODY_BYTES, MAX_ID, CaptureIn, ExpandIn, FeedbackIn, IngestIn, QueryIn
from .service import Service, expand_preview, readable_scopes, run_query, scope_of, settle_trial, trial_status
from .ui.routes import ui_router

READY_WAIT_S = 5.0  # how long a /query waits for the champion to load before a 503 "loading"


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
        service.maintenance = MaintenanceLoop(
            service.db_url, service.maintain, service.search, service.staging.path(), service.forget
        )
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
    app.include_router(ui_router(service))  # the web page, /ui: its own login (a cookie) under the same tokens

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

    require_admin, require_writer = admin_only(service), writers_only(service)
    who = Depends(caller(service))  # the caller's grant (a default, not Annotated: these routes are closures)

    def reading(grant: Grant, scope: str | None) -> str:
        """The scope a read runs in: the one named, else the token's default; 403 when the token may not read it."""
        scope = scope or grant.default
        if not grant.may_read(scope):
            raise StarletteHTTPException(403, f"scope {scope}: this token may not read it")
        return scope

    def writing(grant: Grant, scope: str | None) -> str:
        scope = scope or grant.default
        if not grant.may_write(scope):
            raise StarletteHTTPException(403, f"scope {scope}: this token may not write it")
        return scope

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
    def stats(grant: Grant = who) -> dict:
        """The log's and capture's counts over the scopes the caller may read (an admin: every scope)."""
        with service.pool.connection() as conn:
            scopes = None if grant.admin else readable_scopes(conn, grant)
            counts = feedback.counters(conn, scopes)
            counts["capture"] = capture.counters(conn, scopes)
        last = service.maintenance.last if service.maintenance else None
        return {
            **counts,
            "selector": dict(service.picker.counts),  # topped_up: picks the floor filled from the first-stage order
            "embedded_on_query_path": service.picker.embedded(),  # stays 0: selectors use the stored vectors
            "maintenance": last if grant.admin else None,
            # the running trial and its tallies so far, or null; its tallies span every scope: admins only
            "trial": trial_status(service) if grant.admin else None,
        }

    @app.post("/query")
    def query(body: QueryIn, grant: Grant = who) -> JSONResponse:
        # never served by a selector it is about to replace; a bounded wait, so waiting queries cannot hold
        # every worker thread (and starve /health) while a slow champion loads
        if not service.ready(min(service.picker.timeout_s, READY_WAIT_S)):
            return JSONResponse(
                {"error": "loading: the selector is not loaded yet; retry (GET /health says when it is)"},
                503,
                headers={"Retry-After": "1"},
            )
        # a plain JSONResponse skips FastAPI's jsonable_encoder walk over 20 candidates (~1-2 ms)
        inline = service.inline if body.inline is None else body.inline
        scope = reading(grant, body.scope)
        return JSONResponse(run_query(service, body.query, inline, body.k, scope, grant.reading(scope)))

    @app.post("/expand")
    def expand(body: ExpandIn, grant: Grant = who) -> JSONResponse:
        """One of a query's previews, whole (the consumer read it: not citing it now says it did not help). A query of
        a scope the caller may not read is an unknown id."""
        with service.pool.connection() as conn:
            scope = scope_of(conn, "queries", body.query_id)
        if scope is None or not grant.may_read(scope) or body.scope not in (None, scope):
            raise feedback.FeedbackError(f"unknown query id {body.query_id}")
        return JSONResponse(expand_preview(service, body.query_id, body.n, [scope]))

    @app.post("/feedback", dependencies=[Depends(require_writer)])
    def post_feedback(body: FeedbackIn, grant: Grant = who) -> dict:
        if all(
            x is None for x in (body.used_chunk_ids, body.ignored_chunk_ids, body.answer, body.rating, body.correction)
        ):
            return JSONResponse({"error": "empty feedback: give used_chunk_ids, answer, rating or correction"}, 422)
        with service.pool.connection() as conn:
            # a query of a scope the caller may not write is an unknown id: the answer says nothing of another scope
            scope = scope_of(conn, "queries", body.query_id)
            if scope is None or not grant.may_write(scope) or body.scope not in (None, scope):
                raise feedback.FeedbackError(f"unknown query id {body.query_id}")
            recorded = feedback.record_feedback(
                conn,
                body.query_id,
                used_chunk_ids=body.used_chunk_ids,
                ignored_chunk_ids=body.ignored_chunk_ids,
                answer=body.answer,
                rating=body.rating,
                correction=body.correction,
                scopes=[scope],
            )
        # used_ranks labelled; not_shown / unknown: the answer's [n] that were no label; replaced: the earlier state
        out = {"query_id": body.query_id, **recorded.as_dict()}
        if decided := settle_trial(service, body.query_id):
            out["trial"] = {k: decided[k] for k in ("id", "status", "reason")}
        return out

    @app.post("/ingest", dependencies=[Depends(require_writer)])
    def ingest(body: IngestIn, grant: Grant = who) -> dict:
        scope = writing(grant, body.scope)
        doc = scrub_names(
            Document(f"webhook:{body.source}", "webhook:", body.text.replace("\r\n", "\n"), body.kind, body.title)
        )
        if doc.source != f"webhook:{body.source}":  # two names differing only in a secret would overwrite each other
            seen = doc.source.removeprefix("webhook:")[:200]
            why = f"source: part of it reads as a secret ({seen}); name the note in plain words, e.g. 'team-notes'"
            return JSONResponse({"error": why}, 422)
        with service.pool.connection() as conn:
            report = ingest_documents(conn, [doc], service.ingest, service.search, service.embedder, scope)
            ingest_runs.record(conn, "http", scope, report)
        if report.errors:
            return JSONResponse({"error": report.errors[0]}, 422)
        return {
            "source": doc.source,
            "scope": scope,
            "chunks_inserted": report.chunks_inserted,
            "chunks_kept": report.chunks_kept,
            "duplicates_skipped": report.duplicates_skipped,  # exact duplicates only
            "near_linked": report.near_linked,  # stored, linked to a near chunk of another note
            "redactions": dict(report.redactions),
            "seconds": round(report.seconds, 4),
        }

    @app.post("/capture", status_code=202, dependencies=[Depends(require_writer)])
    def post_capture(body: CaptureIn, grant: Grant = who) -> JSONResponse:
        """Queue an exchange for capture in a scope; 202 with its id, `GET /capture/{id}` says what became of it."""
        scope = writing(grant, body.scope)
        try:
            ex = parse_exchange(body.model_dump(exclude={"scope"}), service.capture.max_chars)
        except CaptureInputError as e:
            return JSONResponse({"error": str(e)}, e.status)
        with service.pool.connection() as conn:
            if intake.pending_count(conn) >= service.capture.max_pending:
                return JSONResponse({"error": f"{service.capture.max_pending} captures pending: try later"}, 429)
            cid = intake.submit(conn, ex, scope)
        service.capture_worker.submit(cid)
        return JSONResponse({"id": cid, "status": "pending", "url": f"/capture/{cid}"}, 202)

    @app.get("/capture/{capture_id}")
    def get_capture(capture_id: Annotated[int, PathParam(ge=1, le=MAX_ID)], grant: Grant = who) -> JSONResponse:
        """status (pending, stored, duplicate, rejected, failed), the gate and rule or model that
        decided, the stored facts' chunk ids. A capture of a scope the caller may not read is an unknown id."""
        with service.pool.connection() as conn:
            scope = scope_of(conn, "captures", capture_id)
            r = capture.result(conn, capture_id, [scope]) if scope and grant.may_read(scope) else None
        if r is None:
            return JSONResponse({"error": f"unknown capture id {capture_id}"}, 404)
        return JSONResponse(r.as_dict())

    return app
