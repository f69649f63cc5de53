"""What the page writes (POST, each with the session's CSRF token): log in and out, ask (a query, logged as the
API's are), answer a query (its `[n]` cited, as `POST /feedback`), rate one candidate for a query, add a note,
correct a document (a newer version; the old one kept, superseded), forget a document. Each write is held to the
scopes its caller may write; a row of another scope is a 404, as an unknown id is.

`forget_document` is the one place the page forgets: the same core as `pai forget` (retrieval/ops/forget.py), every
copy: the document, its chunks and kept versions, what the query log holds of it, the staging files, the pulled
feedback and training files, DVC's cache, MLflow's artifacts, the vector cache; the selectors trained on it marked."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from retrieval.corpus import runs
from retrieval.corpus.ingest import ingest_documents, scrub_names
from retrieval.corpus.sources import Document, text_problem
from retrieval.db import store_id
from retrieval.logs import feedback, ratings
from retrieval.ops import forget as forget_core
from retrieval.ops import forget_files
from retrieval.ops.versions import EditError, edit_document
from retrieval.params import ForgetParams
from retrieval.scopes import ScopeError, check

from ..grants import grant_for
from ..service import Service, run_query, scope_of, settle_trial
from .render import page
from .session import COOKIE, SESSION_S, Sessions, Visit, bearer, csrf_ok, keep, visit


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def forget_document(conn, document_id: int, scope: str, places: list[forget_files.Place]) -> str | None:
    """Forget document `document_id` of `scope`, every copy of it (`places`: forget_files.places); its source, or
    None when there is no such document there."""
    row = conn.execute("SELECT source FROM documents WHERE id = %s AND scope = %s", (document_id, scope)).fetchone()
    if row is None:
        return None
    forget_core.forget(conn, forget_core.Target(doc_ids=(document_id,), scope=scope), places, confirmed=True)
    return row[0]


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused(400, f"the form does not read: {str(e).splitlines()[0][:200]}") from None
    return {k: v[0] for k, v in fields.items()}


def _storable(form: dict[str, str], name: str, limit: int) -> str:
    value = form.get(name, "")
    if why := text_problem(value):
        raise Refused(422, f"{name} {why}")
    if len(value) > limit:
        raise Refused(422, f"{name} is over {limit:,} characters")
    return value


def write_routes(router: APIRouter, service: Service, sessions: Sessions) -> None:
    def post(path: str):
        """A write route: the session's CSRF token checked, a logged-in caller, the form read; `work(visit, form)`
        runs in a worker thread and returns where to go next. A refusal is a page saying why."""

        def register(work: Callable[[Visit, dict, dict], str]):
            async def handle(request: Request) -> Response:
                v = visit(request, sessions, service.host)
                try:
                    form = await _form(request)
                    if not csrf_ok(v.session, form.get("csrf")):
                        raise Refused(403, "the form's CSRF token is missing or stale: reload the page and try again")
                    if v.grant is None:
                        raise Refused(401, "log in first")
                    target = await run_in_threadpool(work, v, form, dict(request.path_params))
                except Refused as r:
                    out = page(
                        "error.html", r.status, title="Refused", message=r.message, csrf=v.session.csrf, grant=v.grant
                    )
                    return keep(out, v, request)
                return keep(RedirectResponse(target, 303), v, request)

            router.add_api_route(path, handle, methods=["POST"], include_in_schema=False)
            return work

        return register

    def writable(v: Visit, scope: str | None) -> str:
        if scope is None or not (v.grant.may_write(scope)):
            raise Refused(403, f"scope {scope}: this login may not write it")
        return scope

    def query_scope(v: Visit, query_id: str, write: bool) -> tuple[int, str]:
        qid = int(query_id) if query_id.isdigit() and len(query_id) < 19 else 0
        with service.pool.connection() as conn:
            scope = scope_of(conn, "queries", qid) if qid else None
        if scope is None or not (v.grant.may_write(scope) if write else v.grant.may_read(scope)):
            raise Refused(404, f"unknown query id {query_id}")
        return qid, scope

    def document_scope(v: Visit, document_id: str) -> tuple[int, str]:
        did = int(document_id) if document_id.isdigit() and len(document_id) < 19 else 0
        with service.pool.connection() as conn:
            row = conn.execute("SELECT scope FROM documents WHERE id = %s", (did,)).fetchone() if did else None
        if row is None or not v.grant.may_write(row[0]):
            raise Refused(404, f"no document {document_id} this login may change")
        return did, row[0]

    @router.post("/ui/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        v = visit(request, sessions, service.host)
        form = await _form(request)
        nxt = form.get("next", "/ui/ask")
        nxt = nxt if nxt.startswith("/ui") and "//" not in nxt else "/ui/ask"
        token = form.get("token", "")
        ok = csrf_ok(v.session, form.get("csrf")) and token.isascii() and grant_for(bearer(token)) is not None
        if not ok:
            out = page("login.html", 401, csrf=v.session.csrf, next=nxt, grant=None, error="wrong token")
            return keep(out, v, request)
        sessions.end(v.sid)  # a new session id on login: one planted before it is worth nothing
        sid, _ = sessions.new(token)
        out = RedirectResponse(nxt, 303)
        secure = request.url.scheme == "https"
        out.set_cookie(COOKIE, sid, max_age=SESSION_S, path="/ui", httponly=True, samesite="strict", secure=secure)
        return out

    @post("/ui/logout")
    def logout(v: Visit, form: dict, params: dict) -> str:
        sessions.end(v.sid)
        return "/ui/login"

    @post("/ui/ask")
    def ask(v: Visit, form: dict, params: dict) -> str:
        text = _storable(form, "query", 4000)
        if not text.strip():
            raise Refused(422, "the query is blank")
        try:
            scope = check(form.get("scope") or v.grant.default)
        except ScopeError as e:
            raise Refused(422, f"scope: {e}") from None
        if not v.grant.may_read(scope):
            raise Refused(403, f"scope {scope}: this login may not read it")
        if not service.ready(5.0):
            raise Refused(503, "the selector is loading: try again in a moment")
        out = run_query(service, text, True, None, scope, v.grant.reading(scope))
        return f"/ui/queries/{out['query_id']}"

    @post("/ui/queries/{query_id}/answer")
    def answer(v: Visit, form: dict, params: dict) -> str:
        qid, scope = query_scope(v, params["query_id"], write=True)
        text = _storable(form, "answer", 50_000)
        if not text.strip():
            raise Refused(422, "the answer is blank")
        with service.pool.connection() as conn:
            try:
                feedback.record_feedback(conn, qid, answer=text, scopes=[scope])
            except feedback.FeedbackError as e:
                raise Refused(422, str(e)) from None
        settle_trial(service, qid)
        return f"/ui/queries/{qid}"

    @post("/ui/queries/{query_id}/rate")
    def rate(v: Visit, form: dict, params: dict) -> str:
        qid, scope = query_scope(v, params["query_id"], write=True)
        chunk = form.get("chunk_id", "")
        if not chunk.isdigit() or len(chunk) > 18 or form.get("useful") not in ("1", "0"):
            raise Refused(422, "a rating names a chunk_id and useful (1 or 0)")
        with service.pool.connection() as conn:
            try:
                ratings.rate(conn, qid, int(chunk), form["useful"] == "1", [scope])
            except feedback.FeedbackError as e:
                raise Refused(422, str(e)) from None
        settle_trial(service, qid)
        back = form.get("back", "")
        return back if back.startswith("/ui/") and "//" not in back else f"/ui/queries/{qid}"

    @post("/ui/memory/notes")
    def add_note(v: Visit, form: dict, params: dict) -> str:
        source, text = _storable(form, "source", 500).strip(), _storable(form, "text", 1_500_000)
        if not source or not text.strip():
            raise Refused(422, "a note needs a name and a text")
        try:
            scope = writable(v, check(form.get("scope") or v.grant.default))
        except ScopeError as e:
            raise Refused(422, f"scope: {e}") from None
        doc = scrub_names(Document(f"webhook:{source}", "webhook:", text.replace("\r\n", "\n"), "markdown"))
        if doc.source != f"webhook:{source}":  # two names differing only in a secret would overwrite each other
            raise Refused(422, "part of the note's name reads as a secret: name it in plain words")
        with service.pool.connection() as conn:
            report = ingest_documents(conn, [doc], service.ingest, service.search, service.embedder, scope)
            runs.record(conn, "ui", scope, report)
            if report.errors:
                raise Refused(422, report.errors[0])
            row = conn.execute(
                "SELECT id FROM documents WHERE scope = %s AND source = %s", (scope, doc.source)
            ).fetchone()
        return f"/ui/documents/{row[0]}"

    @post("/ui/documents/{document_id}/edit")
    def edit(v: Visit, form: dict, params: dict) -> str:
        did, scope = document_scope(v, params["document_id"])
        text = _storable(form, "text", 1_500_000)
        with service.pool.connection() as conn:
            try:
                report = edit_document(conn, did, scope, text, service.ingest, service.search, service.embedder)
            except EditError as e:
                raise Refused(422, str(e)) from None
            runs.record(conn, "ui", scope, report)
        return f"/ui/documents/{did}"

    @post("/ui/documents/{document_id}/forget")
    def forget(v: Visit, form: dict, params: dict) -> str:
        did, scope = document_scope(v, params["document_id"])
        with service.pool.connection() as conn:
            places = forget_files.places(service.forget or ForgetParams(), service.staging.path(), store=store_id(conn))
            source = forget_document(conn, did, scope, places)
        if source is None:
            raise Refused(404, f"no document {did}")
        return f"/ui/memory?done={quote('forgotten: ' + source[:200])}"
