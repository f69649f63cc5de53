"""`pai mcp`: the retrieval service as Model Context Protocol tools, for an assistant (official SDK, `mcp`).

The tools are a front to the service's HTTP routes through `serving.client.Client`: one query path, the
routes' input checks (strict types, size limits, NUL and surrogates refused) and write rules (beyond loopback,
a bearer token). `pai mcp` talks to a running `pai serve` (`--url`), or starts the service in-process on a free
loopback port.

Tools: `context` (the budgeted context, chunks numbered [n], and the query id), `feedback` (the answer's [n]
citations label the log), `capture` (the capture gates), `remember` (a note, stored like a webhook post),
`staging_file` (the staging file of a query this server fetched: what the model saw, for a person).
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import StrictInt, StrictStr

from .client import Client, ClientError

INSTRUCTIONS = (
    "pai-brain is the user's long-term memory: their notes, documents and what earlier conversations "
    "established. Call `context` before answering a question the memory may know about; use only the chunks "
    "that answer it and cite each one you use as [n]. Then call `feedback` with the query id and your final "
    "answer (with its [n] citations): that is how the memory learns which chunks help."
)
MAX_TEXT = 50_000


def _checked(name: str, value, max_len: int, required: bool = True) -> str | None:
    """The routes check again; this keeps a bad argument a one-line tool error instead of a round trip."""
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ToolError(f"{name}: must be a string, not {type(value).__name__}")
    if required and not value.strip():
        raise ToolError(f"{name}: must not be blank")
    if len(value) > max_len:
        raise ToolError(f"{name}: {len(value):,} characters is over the {max_len:,} limit")
    if "\x00" in value or any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise ToolError(f"{name}: contains a NUL byte or a lone surrogate")
    return value


def _int(name: str, value, lo: int, hi: int, required: bool = True) -> int | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ToolError(f"{name}: must be an integer in {lo}..{hi}, not {value!r}")
    return value


def build_mcp(client: Client) -> MCPServer:
    server = MCPServer("pai-brain", instructions=INSTRUCTIONS, log_level="WARNING")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request on the assistant's stderr
    staged: dict[int, str] = {}  # query id -> staging file, for queries this server fetched

    def call(fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except ClientError as e:
            raise ToolError(str(e)) from None

    @server.tool()
    def context(query: StrictStr, k: StrictInt | None = None) -> str:
        """Search the user's memory. Returns the chunks that best answer `query`, each under its number [n]
        with source, line range, heading and the day it was written, and a query id. A chunk "newer than [m]"
        resembles [m] and was written later (a correction, or an update of it). Use only chunks that answer the
        question and cite each one you use as [n] in your answer; then call `feedback` with the query id and
        that answer."""
        _checked("query", query, 4000)
        _int("k", k, 1, 20, required=False)
        ctx = call(client.context, query, k)
        staged[ctx.query_id] = ctx.staging_file
        return f"query_id: {ctx.query_id}\n\n{ctx.prompt()}"

    @server.tool()
    def feedback(
        query_id: StrictInt,
        answer: StrictStr | None = None,
        rating: StrictInt | None = None,
        correction: StrictStr | None = None,
    ) -> str:
        """Tell the memory what helped: `answer` is your final answer, whose [n] citations mark the chunks you
        used (the other chunks you were shown count as not useful); `rating` +1 or -1 from the user;
        `correction` the right answer when yours was wrong."""
        _int("query_id", query_id, 1, 2**63 - 1)
        _checked("answer", answer, MAX_TEXT, required=False)
        _checked("correction", correction, MAX_TEXT, required=False)
        if rating is not None and (isinstance(rating, bool) or rating not in (-1, 1)):
            raise ToolError(f"rating: must be 1 or -1, not {rating!r}")
        r = call(client.feedback, query_id, answer=answer, rating=rating, correction=correction)
        used = r.get("used_ranks") or []
        return f"recorded for query {query_id}" + (f": used {', '.join(f'[{n}]' for n in used)}" if used else "")

    @server.tool()
    def capture(
        user: StrictStr, assistant: StrictStr, source: StrictStr | None = None, session: StrictStr | None = None
    ) -> str:
        """Offer a finished exchange (the user's turn and your answer) to the memory: facts worth keeping are
        stored after the capture gates (secrets, chit-chat and duplicates are refused)."""
        _checked("user", user, MAX_TEXT, required=False)
        _checked("assistant", assistant, MAX_TEXT)
        _checked("source", source, 500, required=False)
        _checked("session", session, 500, required=False)
        receipt = call(client.capture, user, assistant, source=source, session=session)
        return f"capture {receipt.id}: {receipt.status}"

    @server.tool()
    def remember(text: StrictStr, title: StrictStr | None = None) -> str:
        """Store a note in the memory (scrubbed of secrets, chunked, deduplicated). The same title replaces
        the earlier note of that title."""
        _checked("text", text, 2_000_000)
        _checked("title", title, 500, required=False)
        key = title.strip() if title and title.strip() else text
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", title or "").strip("-")[:80] or "note"
        source = f"mcp-{slug}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:10]}"  # one note per exact title
        r = call(client.ingest, source, text, title=title)
        return (
            f"stored {r['source']}: {r['chunks_inserted']} new chunks ({r.get('near_linked', 0)} near a stored note),"
            f" {r['duplicates_skipped']} exact duplicates skipped"
        )

    @server.tool()
    def staging_file(query_id: StrictInt) -> str:
        """The staging file of a query this server answered: the markdown listing every candidate the
        selector saw, for a person to open."""
        _int("query_id", query_id, 1, 2**63 - 1)
        path = staged.get(query_id)
        if path is None:
            raise ToolError(f"query {query_id} was not answered by this server; its staging file is in the query log")
        p = Path(path)
        if p.suffix != ".md" or "staging" not in p.parts[:-1]:  # only what the service names a staging file
            raise ToolError(f"{path}: not a staging file")
        try:
            return p.read_text(encoding="utf-8")
        except OSError as e:
            raise ToolError(f"{path}: {e.strerror or e} (the service runs on another machine?)") from None

    return server
