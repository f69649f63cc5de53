"""What the page reads (GET): ask and see a query, browse the memory, a document, a chunk and its history, the
loop, the store's health, the staging file. Each is held to the scopes its caller may read; a row of another
scope is a 404, as an unknown id is. Beyond loopback a visit without a valid token is sent to the login."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, PlainTextResponse, RedirectResponse, Response

from retrieval.logs import deployments, query_view, trials
from retrieval.ops import browse, store_health, versions

from ..grants import Grant
from ..service import Service, readable_scopes
from .render import HEADERS, page, steps_plot
from .session import Sessions, Visit, keep, visit

PER_PAGE = 50
MAX_PAGE = 10_000


def scopes_for(conn, grant: Grant) -> list[str] | None:
    """The scopes a caller reads on the page: None (every scope) for an admin."""
    return None if grant.admin else readable_scopes(conn, grant)


def _day(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC) if value else None
    except ValueError:
        return None


def _int(value: str | None, default: int, top: int) -> int:
    return min(max(int(value), 1), top) if value and value.isdigit() and len(value) < 8 else default


def read_routes(router: APIRouter, service: Service, sessions: Sessions) -> None:
    def enter(request: Request) -> Visit | Response:
        v = visit(request, sessions, service.host)
        if v.grant is None:
            return keep(RedirectResponse(f"/ui/login?next={request.url.path}", 303), v, request)
        return v

    def show(request: Request, v: Visit, name: str, status: int = 200, **values) -> Response:
        values |= {"csrf": v.session.csrf, "grant": v.grant, "loopback_owner": not v.grant.scoped and v.grant.admin}
        return keep(page(name, status, **values), v, request)

    def missing(request: Request, v: Visit, what: str) -> Response:
        return show(request, v, "error.html", 404, title="Not found", message=f"{what}: not found")

    @router.get("/ui", include_in_schema=False)
    def home() -> Response:
        return RedirectResponse("/ui/ask", 303)

    @router.get("/ui/static/ui.css", include_in_schema=False)
    def css() -> Response:
        return FileResponse(Path(__file__).parent / "static" / "ui.css", media_type="text/css", headers=HEADERS)

    @router.get("/ui/login", include_in_schema=False)
    def login_page(request: Request, next: str = "/ui/ask") -> Response:
        v = visit(request, sessions, service.host)
        nxt = next if next.startswith("/ui") and "//" not in next else "/ui/ask"
        return keep(page("login.html", csrf=v.session.csrf, next=nxt, grant=None, error=None), v, request)

    @router.get("/ui/ask", include_in_schema=False)
    def ask(request: Request) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            scopes = scopes_for(conn, v.grant)
            recent = query_view.recent(conn, scopes)
            choices = scopes if scopes is not None else browse.scopes_held(conn)
        default = v.grant.default
        return show(
            request, v, "ask.html", title="Ask", recent=recent, scopes=sorted(set(choices) | {default}), default=default
        )

    @router.get("/ui/queries/{query_id}", include_in_schema=False)
    def query(request: Request, query_id: int) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            q = query_view.query_view(conn, query_id, scopes_for(conn, v.grant))
        if q is None:
            return missing(request, v, f"query {query_id}")
        return show(request, v, "query.html", title=f"Query {q.id}", q=q, may_write=v.grant.may_write(q.scope))

    @router.get("/ui/queries/{query_id}/staging", include_in_schema=False)
    def staging_file(request: Request, query_id: int) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            q = query_view.query_view(conn, query_id, scopes_for(conn, v.grant))
        root = os.path.realpath(service.staging.path())
        path = os.path.realpath(q.staging_path) if q and q.staging_path else ""
        if not path.startswith(root + os.sep) or not os.path.isfile(path):
            return missing(request, v, f"the staging file of query {query_id}")
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        return keep(PlainTextResponse(text, headers=HEADERS), v, request)

    @router.get("/ui/memory", include_in_schema=False)
    def memory(
        request: Request,
        q: str = "",
        source: str = "",
        kind: str = "",
        since: str = "",
        until: str = "",
        page_no: str = "1",
        done: str = "",
    ) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        n = _int(page_no, 1, MAX_PAGE)
        with service.pool.connection() as conn:
            scopes = scopes_for(conn, v.grant)
            rows, total = browse.documents(
                conn, scopes, q, source, kind, _day(since), _day(until), (n - 1) * PER_PAGE, PER_PAGE
            )
            held = scopes if scopes is not None else browse.scopes_held(conn)
        filters = {"q": q, "source": source, "kind": kind, "since": since, "until": until}
        pages = max(1, -(-total // PER_PAGE))
        return show(
            request, v, "memory.html", title="Memory", rows=rows, total=total, page_no=n, pages=pages,
            filters=filters, kinds=browse.KINDS, done=done[:300], scopes=sorted(set(held) | {v.grant.default}),
            default=v.grant.default,
        )  # fmt: skip

    @router.get("/ui/documents/{document_id}", include_in_schema=False)
    def document(request: Request, document_id: int) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            d = browse.document(conn, document_id, scopes_for(conn, v.grant))
            chunks = browse.chunks_of(conn, document_id) if d else []
            history = versions.versions(conn, document_id) if d else []
        if d is None:
            return missing(request, v, f"document {document_id}")
        return show(
            request, v, "document.html", title=d.source, d=d, chunks=chunks, versions=history,
            text=history[0].text if history else "", may_write=v.grant.may_write(d.scope),
        )  # fmt: skip

    @router.get("/ui/chunks/{chunk_id}", include_in_schema=False)
    def chunk(request: Request, chunk_id: int) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            scopes = scopes_for(conn, v.grant)
            c = browse.chunk(conn, chunk_id, scopes)
            events = browse.history(conn, chunk_id, scopes) if c else []
            near = browse.chunk(conn, c.near_chunk_id, scopes) if c and c.near_chunk_id else None
        if c is None:
            return missing(request, v, f"chunk {chunk_id}")
        return show(request, v, "chunk.html", title=f"Chunk {c.id}", c=c, events=events, near=near)

    @router.get("/ui/loop", include_in_schema=False)
    def loop(request: Request) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            deps = deployments.deployments(conn, 30)
            trial, evidence, series = None, None, None
            if v.grant.admin:  # a trial's tallies span every scope: admins only (as GET /stats)
                trial = trials.running(conn)
                if trial is not None:
                    evidence = trials.verdict(conn, trial, service.relabel).as_dict()
                    series = _trial_series(trials.outcomes(conn, trial.id, service.relabel))
            past = trials.recent(conn, 10) if v.grant.admin else []
        return show(
            request, v, "loop.html", title="Loop", serving=service.picker.selector.version, deployments=deps,
            trial=trial, evidence=evidence, series=series, past=past, recall=_recall_series(deps),
            mlflow=_mlflow_ui(),
        )  # fmt: skip

    @router.get("/ui/health", include_in_schema=False)
    def health(request: Request) -> Response:
        v = enter(request)
        if isinstance(v, Response):
            return v
        with service.pool.connection() as conn:
            h = store_health.store_health(conn, scopes_for(conn, v.grant))
        return show(request, v, "health.html", title="Health", h=h)


def _trial_series(kinds: list[str]) -> dict:
    """The challenger's wins and losses, cumulated over the trial's judged queries in order (`trials.outcomes`), as a
    plot."""
    wins, losses, w, lo = [], [], 0, 0
    for k in kinds:
        if k not in ("win", "loss", "tie"):
            continue
        w, lo = w + (k == "win"), lo + (k == "loss")
        wins.append(w)
        losses.append(lo)
    return steps_plot({"wins": wins, "losses": losses})


def _recall_series(deps: list[deployments.Deployment]) -> dict | None:
    """Recall@5 of each deployed version beside the baselines, where its record carries them (oldest first)."""
    rows = []
    for d in reversed(deps):
        found = {k: float(v) for k, v in d.record.items() if "recall" in k and isinstance(v, int | float)}
        if found:
            rows.append((d.version, found))
    if not rows:
        return None
    keys = sorted({k for _, f in rows for k in f})
    return steps_plot({k: [f.get(k, 0.0) for _, f in rows] for k in keys}) | {"versions": [r for r, _ in rows]}


def _mlflow_ui() -> str | None:
    """The MLflow server's address when runs are tracked on one (a local sqlite store has no page to link)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else None
