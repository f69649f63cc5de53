"""The retrieval service: decode request -> retrieve -> pick -> log -> encode response.

Selection never blocks the answer: the response carries the cached selector pick for the same
query when there is one, else the similarity order, and the selector runs in the background (its
pick is logged and cached for next time). `inline` waits for the selector, with a timeout.
"""

from __future__ import annotations

import hmac
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psycopg
from fastapi import Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from retrieval import deployments, feedback, staging
from retrieval.db import DatabaseError, connect
from retrieval.embed import Embedder
from retrieval.ingest import ingest_documents
from retrieval.params import IngestParams, SearchParams, StagingParams
from retrieval.search import Candidate, keyword_rankings, search_vector, take_budget
from retrieval.selection import PROMPT_VERSION, Pick
from retrieval.sources import Document

from .hotswap import HotSwapper
from .picker import Picker
from .selectors import CascadeSelector

MAX_BODY_BYTES = 2_000_000
LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
    keyword_workers: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(8, thread_name_prefix="keyword"))


class QueryIn(BaseModel):
    query: str = Field(min_length=1, max_length=4000)
    inline: bool | None = Field(None, description="wait for the selector (default: the server's --inline)")


class FeedbackIn(BaseModel):
    query_id: int
    used_chunk_ids: list[int] | None = Field(None, description="chunks the consumer used; the other candidates were ignored")
    answer: str | None = Field(None, max_length=50_000, description="final answer; [n] citations mark used candidates")
    rating: Literal[-1, 1] | None = None
    correction: str | None = Field(None, max_length=50_000)


class IngestIn(BaseModel):
    source: str = Field(min_length=1, max_length=500, description="a name for the note, unique per note")
    text: str = Field(min_length=1, max_length=MAX_BODY_BYTES)
    kind: Literal["markdown", "text", "code"] = "markdown"
    title: str | None = None


def create_app(service: Service) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        connect(service.db_url).close()  # migrations, once
        service.pool = ConnectionPool(
            service.db_url, min_size=4, max_size=16, open=True,
            kwargs={"autocommit": True}, configure=register_vector,
        )  # fmt: skip
        service.embedder.encode(["warm up"])
        if service.swapper is not None:
            service.swapper.start()
        yield
        if service.swapper is not None:
            service.swapper.stop()
        service.picker.close()
        service.keyword_workers.shutdown()
        service.pool.close()

    app = FastAPI(title="pai-brain retrieval service", version="0.1.0", lifespan=lifespan)

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        size = request.headers.get("content-length")
        if size and size.isdigit() and int(size) > MAX_BODY_BYTES:
            return JSONResponse({"error": f"body of {int(size):,} bytes is over the {MAX_BODY_BYTES:,}-byte limit"}, 413)
        return await call_next(request)

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
    def health() -> dict:
        with service.pool.connection() as conn:
            (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
        return {"status": "ok", "chunks": chunks, "selector": service.picker.selector.version, "prompt_version": PROMPT_VERSION}

    def require_admin(request: Request) -> None:
        token = os.environ.get("PAI_ADMIN_TOKEN")
        if token:
            if not hmac.compare_digest(request.headers.get("authorization", ""), f"Bearer {token}"):
                raise StarletteHTTPException(401, "admin route: missing or wrong bearer token (PAI_ADMIN_TOKEN)")
        elif service.host not in LOOPBACK:
            raise StarletteHTTPException(403, f"admin routes are off: the service listens on {service.host}; set PAI_ADMIN_TOKEN")

    @app.get("/selector")
    def get_selector() -> dict:
        """The selector serving now and, when the service follows deployments, the latest ones."""
        out = {"version": service.picker.selector.version, "follows_deployments": service.swapper is not None}
        if service.swapper is not None:
            out.update(service.swapper.status())
            with service.pool.connection() as conn:
                out["deployments"] = [{"id": d.id, "version": d.version, "action": d.action, "reason": d.reason,
                                       "created_at": d.created_at.isoformat(), "applies": deployments.applies(conn, d.id)}
                                      for d in deployments.deployments(conn, 5)]  # fmt: skip
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
        return {**counts, "selector": dict(service.picker.counts)}

    @app.post("/query")
    def query(body: QueryIn) -> JSONResponse:
        # a plain JSONResponse skips FastAPI's jsonable_encoder walk over 20 candidates (~1-2 ms)
        return JSONResponse(run_query(service, body.query, service.inline if body.inline is None else body.inline))

    @app.post("/feedback")
    def post_feedback(body: FeedbackIn) -> dict:
        if body.used_chunk_ids is None and body.answer is None and body.rating is None and body.correction is None:
            return JSONResponse({"error": "empty feedback: give used_chunk_ids, answer, rating or correction"}, 422)
        with service.pool.connection() as conn:
            used = feedback.record_feedback(conn, body.query_id, used_chunk_ids=body.used_chunk_ids,
                                            answer=body.answer, rating=body.rating, correction=body.correction)  # fmt: skip
        return {"query_id": body.query_id, "used_ranks": used}

    @app.post("/ingest")
    def ingest(body: IngestIn) -> dict:
        if "\x00" in body.text:
            return JSONResponse({"error": "text contains NUL bytes"}, 422)
        source = f"webhook:{body.source}"
        doc = Document(source, "webhook:", body.text.replace("\r\n", "\n"), body.kind, body.title)
        with service.pool.connection() as conn:
            report = ingest_documents(conn, [doc], service.ingest, service.search, service.embedder)
        return {"source": source, "chunks_inserted": report.chunks_inserted, "chunks_kept": report.chunks_kept,
                "duplicates_skipped": report.duplicates_skipped, "redactions": dict(report.redactions),
                "seconds": round(report.seconds, 4)}  # fmt: skip

    return app


def run_query(service: Service, text: str, inline: bool) -> dict:
    # the keyword side needs no embedding: it runs on its own connection while the query is embedded
    keyword = service.keyword_workers.submit(_keyword_side, service, text)
    qvec = service.embedder.encode([text])[0]
    with service.pool.connection() as conn:
        result = search_vector(conn, text, qvec, service.search, keyword.result())
        learned = feedback.learned_answers(conn, text)
    shown = result.above  # what the staging file lists and the selector sees, numbered 1..N
    selector = service.picker.selector  # read once: a hot-swap mid-request does not change it
    fast, slow = (selector.fast, selector.slow) if isinstance(selector, CascadeSelector) else (None, selector)
    pick = service.picker.cached(text, shown, slow)
    status = "cached" if pick else "pending"
    if pick is None and (inline or fast) and shown:  # a cascade's fast selector always answers inline
        pick = service.picker.select(text, shown, fast or selector)
        status = pick.status
    if pick is None:
        chosen = shown[: service.picker.k]
        version = "similarity"
    else:
        by_id = {c.chunk_id: c for c in shown}
        chosen = [by_id[i] for i in pick.ids]
        version = pick.version
    context = take_budget(chosen, service.search.token_budget, service.search.min_chunks)
    sf = staging.from_result(result)
    path = staging.write(sf, Path(service.staging.dir), display_root=os.getcwd())
    with service.pool.connection() as conn:
        qid = feedback.log_query(conn, text, result.candidates, version, [c.rank for c in chosen],
                                 prompt_version=PROMPT_VERSION, selection_status=status, staging_path=str(path),
                                 threshold=service.search.threshold)  # fmt: skip
    if (status == "pending" or fast) and status != "cached" and shown:  # the slow selector refines for next time
        service.picker.select_later(text, shown, lambda p: _log_pick(service, qid, p), slow)
    return {
        "query_id": qid,
        "selector_version": version,  # what chose this context ("similarity" while the pick is pending)
        "active_selector": selector.version,  # the selector this request ran (inline) or queued (background)
        "selection_status": status,
        "context": [_context_item(c) for c in context],
        "learned": [{"question": q, "answer": a, "similarity": round(s, 3)} for q, a, s in learned],
        "candidates": [{"rank": c.rank, "chunk_id": c.chunk_id, "source": c.source, "score": round(c.score, 4)} for c in result.candidates],
        "below_threshold": result.below_threshold,
        "staging_file": str(path),
    }


def _keyword_side(service: Service, text: str) -> list[list[int]]:
    with service.pool.connection() as conn:
        return keyword_rankings(conn, text, service.search)


def _log_pick(service: Service, query_id: int, pick: Pick) -> None:
    with service.pool.connection() as conn:
        feedback.record_pick(conn, query_id, list(pick.ranks), pick.status, pick.version)


def _context_item(c: Candidate) -> dict:
    return {"rank": c.rank, "chunk_id": c.chunk_id, "source": c.source, "heading": c.heading,
            "start_line": c.start_line, "end_line": c.end_line, "score": round(c.score, 4), "text": c.text}  # fmt: skip
