"""A Python client of the retrieval service: what an assistant integration (the MCP server, a hook, a script)
calls instead of hand-written HTTP.

    from serving.client import Client
    with Client("http://127.0.0.1:8484", token=None) as pai:
        ctx = pai.context("how do I rotate the API token?")
        print(ctx.prompt())                          # the chunks, numbered [n], to put in the prompt
        more = pai.expand(ctx.query_id, ctx.previews[0].n)  # a preview read whole, when its line looks useful
        pai.feedback(ctx.query_id, answer="Use `pai token rotate` [2].")

Every call is one HTTP request to the same routes as any client (one query path, the same input checks and
write rules); a refused request raises `ClientError` with the service's one-line reason. The token is sent as
a bearer token (needed beyond loopback: the read token for `context`, the write token for the rest). `scope`
(else `PAI_SCOPE`) is the scope every call names; None: the token's default scope (`serving.grants`); each call
may name another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import httpx

DEFAULT_URL = "http://127.0.0.1:8484"


class ClientError(RuntimeError):
    """The service refused or failed a request: `status` (0: unreachable) and its one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}" if status else message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Chunk:
    n: int  # the candidate's number: cite it as [n]
    chunk_id: int
    source: str
    heading: str | None
    start_line: int | None
    end_line: int | None
    text: str
    date: str | None = None  # when its document was written (ISO 8601, UTC)
    newer_than: tuple[int, ...] = ()  # the [n] of near chunks in this context whose documents are older

    def cite(self) -> str:
        lines = f":{self.start_line}-{self.end_line}" if self.start_line is not None else ""
        heading = f" — {self.heading}" if self.heading else ""
        when = [f"written {self.date[:10]}"] if self.date else []
        when += [f"newer than {', '.join(f'[{n}]' for n in self.newer_than)}"] if self.newer_than else []
        return f"[{self.n}] {self.source}{lines}{heading}" + (f" ({', '.join(when)})" if when else "")


@dataclass(frozen=True)
class Preview:
    n: int  # `expand` it by this number; cite it as [n] once read
    chunk_id: int
    source: str
    line: str  # where it is from, its heading, its first words: one line

    def cite(self) -> str:
        return f"[{self.n}] {self.line}"


def chunk_of(c: dict) -> Chunk:
    """A context item (or an expanded preview) of the service's answer as a `Chunk`."""
    return Chunk(
        c["rank"],
        c["chunk_id"],
        c["source"],
        c["heading"],
        c["start_line"],
        c["end_line"],
        c["text"],
        c.get("date"),  # a service from before dates: none
        tuple(c.get("newer_than") or ()),
    )


PREVIEWS_HEADER = "Not read yet (`expand` n reads one whole; cite it once read):"


@dataclass(frozen=True)
class Context:
    query_id: int
    query: str
    chunks: list[Chunk]
    selector: str
    staging_file: str
    learned: list[dict] = field(default_factory=list)
    scope: str | None = None  # the scope the query ran in (None: a service from before scopes)
    previews: list[Preview] = field(default_factory=list)  # the next candidates, one line each (`expand` reads one)

    def prompt(self) -> str:
        """The context as an assistant reads it: each chunk under its [n], source, lines, heading, the day it was
        written and the [n] of the near ones it is newer than; then the previews, one line each."""
        parts = [f"{c.cite()}\n{c.text.strip()}" for c in self.chunks]
        for qa in self.learned:
            parts.append(f"(learned answer to a similar question: {qa['question']})\n{qa['answer']}")
        if self.previews:
            parts.append("\n".join([PREVIEWS_HEADER, *(p.cite() for p in self.previews)]))
        return "\n\n".join(parts) if parts else "(nothing stored answers this)"


@dataclass(frozen=True)
class CaptureReceipt:
    id: int
    status: str


class Client:
    def __init__(
        self, url: str | None = None, token: str | None = None, timeout: float = 60.0, scope: str | None = None
    ):
        self.url = (url or os.environ.get("PAI_URL") or DEFAULT_URL).rstrip("/")
        self.scope = scope or os.environ.get("PAI_SCOPE") or None
        headers = {"authorization": f"Bearer {token}"} if token else {}
        try:
            self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        except (httpx.InvalidURL, ValueError) as e:
            raise ClientError(0, f"{self.url}: not a usable URL ({e})") from None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kw) -> httpx.Response:
        try:
            return self._http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise ClientError(0, f"{self.url}: {type(e).__name__}: {e}".splitlines()[0]) from None

    def _call(self, method: str, path: str, **kw) -> dict:
        r = self._send(method, path, **kw)
        try:
            body = r.json()
        except ValueError:
            body = {"error": r.text.strip().splitlines()[0] if r.text.strip() else r.reason_phrase}
        if r.status_code >= 400:
            raise ClientError(r.status_code, str(body.get("error", body)) if isinstance(body, dict) else str(body))
        return body

    def health(self) -> dict:
        """/health's answer, ready or not (a 503 "loading" is returned, not raised)."""
        return self._send("GET", "/health").json()

    def _scoped(self, body: dict, scope: str | None) -> dict:
        """`body` with the scope named (this call's, else the client's); the service checks the name."""
        scope = scope or self.scope
        return body if scope is None else {**body, "scope": scope}

    def context(self, query: str, k: int | None = None, scope: str | None = None) -> Context:
        """The budgeted context the service serves for `query` (its selector's pick), and the query id that
        feedback refers to. `k` keeps at most the first k chunks of it (the service logs only those as shown)."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ClientError(422, f"k must be a positive integer, not {k!r}")
        body = self._call(
            "POST", "/query", json=self._scoped({"query": query} if k is None else {"query": query, "k": k}, scope)
        )
        chunks = [chunk_of(c) for c in body["context"]]
        previews = [Preview(p["rank"], p["chunk_id"], p["source"], p["preview"]) for p in body.get("previews") or []]
        return Context(
            body["query_id"],
            query,
            chunks,
            body["selector_version"],
            body["staging_file"],
            body.get("learned") or [],
            body.get("scope"),
            previews,
        )

    def expand(self, query_id: int, n: int, scope: str | None = None) -> Chunk:
        """Preview [n] of `query_id`, whole. The service logs it as read: cite it as [n] if it helped; read and
        not cited, it counts as not useful."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1000:
            raise ClientError(422, f"n must be a preview's number (an integer from 1 to 1000), not {n!r}")
        return chunk_of(self._call("POST", "/expand", json=self._scoped({"query_id": query_id, "n": n}, scope)))

    def feedback(
        self,
        query_id: int,
        answer: str | None = None,
        rating: int | None = None,
        correction: str | None = None,
        used_chunk_ids: list[int] | None = None,
        scope: str | None = None,
    ) -> dict:
        """The consumer's verdict: the `[n]` cited in `answer` are the used chunks (the others shown are
        ignored, those never shown stay unlabelled), a +1/-1 rating, a correction of the answer."""
        body = {"query_id": query_id}
        for key, value in (
            ("answer", answer),
            ("rating", rating),
            ("correction", correction),
            ("used_chunk_ids", used_chunk_ids),
        ):
            if value is not None:
                body[key] = value
        return self._call("POST", "/feedback", json=self._scoped(body, scope))

    def capture(
        self,
        user: str,
        assistant: str,
        source: str | None = None,
        session: str | None = None,
        scope: str | None = None,
    ) -> CaptureReceipt:
        """Hand a finished exchange to the capture gates (facts worth keeping are stored, the rest refused)."""
        body = {"user": user, "assistant": assistant}
        if source is not None:
            body["source"] = source
        if session is not None:
            body["session"] = session
        r = self._call("POST", "/capture", json=self._scoped(body, scope))
        return CaptureReceipt(r["id"], r["status"])

    def capture_outcome(self, capture_id: int) -> dict:
        return self._call("GET", f"/capture/{int(capture_id)}")

    def ingest(
        self, source: str, text: str, title: str | None = None, kind: str = "markdown", scope: str | None = None
    ) -> dict:
        """Store a note as a document (scrubbed, chunked, deduplicated), replacing an earlier one of `source`."""
        body = {"source": source, "text": text, "kind": kind}
        if title is not None:
            body["title"] = title
        return self._call("POST", "/ingest", json=self._scoped(body, scope))
