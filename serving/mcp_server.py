"""`pai mcp`: the retrieval service as Model Context Protocol tools, for an assistant (the official SDK's low-level
server: it advertises only what it serves, tools, and takes arguments exactly as sent).

The tools are a front to the service's HTTP routes through `serving.client.Client`: one query path, the routes'
input checks (strict types, size limits, NUL and surrogates refused: the same pydantic types as the routes) and write
rules (beyond loopback, a bearer token). Each tool publishes its parameters with their limits, hints a client can act
on (read-only, destructive, idempotent), and a structured result beside the text an assistant reads.

Tools: `context` (the budgeted context, chunks numbered [n], previews of the next candidates, and the query id),
`expand` (a preview read whole), `feedback` (the answer's [n]
citations label the log), `capture` and `capture_result` (the capture gates and what they decided), `remember` (a
note, stored like a webhook post), `staging_file` (the staging file of a query this server fetched, for a person).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from pydantic import BaseModel, ValidationError

from retrieval.query import staging
from retrieval.scrub import scrub_text

from .client import Client, ClientError
from .mcp_tools import (
    CaptureArgs,
    CaptureOut,
    CaptureResultArgs,
    ChunkOut,
    ContextArgs,
    ContextOut,
    ExpandArgs,
    FeedbackArgs,
    FeedbackOut,
    RememberArgs,
    RememberOut,
    StagingArgs,
    feedback_text,
)

INSTRUCTIONS = (
    "pai-brain is the user's long-term memory: their notes, documents and what earlier conversations "
    "established. Call `context` before answering a question the memory may know about; use only the chunks "
    "that answer it and cite each one you use as [n]. When they do not answer it fully, read a preview that looks "
    "like it would (`expand`) and cite it if it helps. Then call `feedback` with the query id and your final "
    "answer (with its [n] citations): that is how the memory learns which chunks help."
)
CAPTURE_WAIT_S = 2.0  # `capture` waits this long for the gates' decision before answering "pending"
log = logging.getLogger("pai.mcp")


class ToolFailure(Exception):
    """A tool call refused or failed: its one line is the tool's error result."""


@dataclass(frozen=True)
class ToolSpec:
    tool: types.Tool
    args: type[BaseModel]
    run: Callable[[BaseModel], tuple[str, dict | None]]  # -> (the text an assistant reads, structured content)


def version() -> str:
    try:
        return importlib.metadata.version("pai-brain")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def note_source(title: str | None, text: str) -> str:
    """A remembered note's source name: `mcp-<slug>-<hash>`, one note per exact title (per text when untitled).
    The slug is the scrubbed title lower-cased to letters, digits and dashes; the hash is 10 hex digits of the
    exact title. Neither can read as a secret: a name that still would is `mcp-note-<hash>`. The title itself
    stays the note's heading, scrubbed like any text."""
    key = title.strip() if title and title.strip() else text
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", (scrub_text(title) or "").lower()).strip("-")[:60].strip("-") or "note"
    source = f"mcp-{slug}-{digest}"
    return source if scrub_text(f"webhook:{source}") == f"webhook:{source}" else f"mcp-note-{digest}"


def inside(path: str, root: Path) -> Path:
    """`path` resolved (symlinks followed) when it is a markdown file under `root` resolved; else ToolFailure."""
    try:
        real, top = Path(path).resolve(strict=True), root.resolve()
    except (OSError, RuntimeError) as e:  # missing, a symlink loop
        raise ToolFailure(
            f"{path}: {getattr(e, 'strerror', None) or e} (the service runs on another machine?)"
        ) from None
    if real.suffix != ".md" or not real.is_file() or not real.is_relative_to(top):
        raise ToolFailure(f"{path}: not a staging file under {top}")
    return real


def build_mcp(client: Client, staging_root: Path) -> Server:
    """The MCP server in front of `client`; `staging_file` reads only markdown files under `staging_root` (the
    service's staging dir)."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request on the assistant's stderr
    staged: dict[int, tuple[str, str | None]] = {}  # query id -> (staging file, scope), for queries this server fetched

    def call(fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except ClientError as e:
            raise ToolFailure(str(e)) from None

    def context(a: ContextArgs) -> tuple[str, dict]:
        ctx = call(client.context, a.query, a.k, a.scope)
        staged[ctx.query_id] = (ctx.staging_file, ctx.scope)
        return f"query_id: {ctx.query_id}\n\n{ctx.prompt()}", ContextOut.of(ctx).model_dump()

    def feedback(a: FeedbackArgs) -> tuple[str, dict]:
        r = call(client.feedback, a.query_id, answer=a.answer, rating=a.rating, correction=a.correction, scope=a.scope)
        out = FeedbackOut.model_validate(r)
        return feedback_text(out), out.model_dump(exclude_none=True)

    def capture(a: CaptureArgs) -> tuple[str, dict]:
        receipt = call(client.capture, a.user, a.assistant, source=a.source, session=a.session, scope=a.scope)
        deadline = time.monotonic() + CAPTURE_WAIT_S
        r = {"id": receipt.id, "status": receipt.status}
        while r["status"] == "pending" and time.monotonic() < deadline:
            time.sleep(0.1)
            r = call(client.capture_outcome, receipt.id)
        return CaptureOut.model_validate(r).summary()

    def capture_result(a: CaptureResultArgs) -> tuple[str, dict]:
        return CaptureOut.model_validate(call(client.capture_outcome, a.capture_id)).summary()

    def remember(a: RememberArgs) -> tuple[str, dict]:
        r = call(client.ingest, note_source(a.title, a.text), a.text, title=a.title, scope=a.scope)
        out = RememberOut.model_validate(r)
        text = (
            f"stored {out.source}: {out.chunks_inserted} new chunks ({out.near_linked} near a stored note),"
            f" {out.duplicates_skipped} exact duplicates skipped"
            + (f"; secrets redacted: {out.redactions}" if out.redactions else "")
        )
        return text, out.model_dump()

    def expand(a: ExpandArgs) -> tuple[str, dict]:
        c = call(client.expand, a.query_id, a.n, a.scope)
        return f"{c.cite()}\n{c.text.strip()}", ChunkOut(**vars(c)).model_dump()

    def staging_file(a: StagingArgs) -> tuple[str, None]:
        path, scope = staged.get(a.query_id, (None, None))
        asked = a.scope or client.scope
        if path is None or asked not in (None, scope):  # another scope's query reads as one never answered here
            raise ToolFailure(
                f"query {a.query_id} was not answered by this server; its staging file is in the query log"
            )
        try:
            text = inside(path, staging_root).read_text(encoding="utf-8")
        except OSError as e:
            raise ToolFailure(f"{path}: {e.strerror or e}") from None
        try:
            written_in = staging.parse(text).scope
        except staging.StagingParseError:
            written_in = None
        if scope is not None and written_in != scope:  # the file at that path is not the one this query wrote
            raise ToolFailure(f"{path}: not the staging file of query {a.query_id}")
        return text, None

    def spec(fn, args, out, title, description, *, read_only, destructive=False, idempotent=True) -> ToolSpec:
        hints = types.ToolAnnotations(
            title=title,
            read_only_hint=read_only,
            destructive_hint=None if read_only else destructive,
            idempotent_hint=idempotent,
            open_world_hint=False,  # the user's own memory, nothing beyond it
        )
        tool = types.Tool(
            name=fn.__name__,
            title=title,
            description=description,
            input_schema=args.model_json_schema(),
            output_schema=out.model_json_schema() if out else None,
            annotations=hints,
        )
        return ToolSpec(tool, args, fn)

    specs = {
        s.tool.name: s
        for s in (
            spec(
                context,
                ContextArgs,
                ContextOut,
                "Search the memory",
                "Search the user's memory. Returns the chunks that best answer `query`, each under its number [n] with "
                'source, line range, heading and the day it was written, and a query id. A chunk "newer than [m]" '
                "resembles [m] and was written later (a correction, or an update of it). Use only chunks that answer "
                "the question and cite each one you use as [n] in your answer; then call `feedback` with the query id "
                "and that answer. After the chunks come previews: the next candidates, one line each. When the chunks "
                "do not answer the question fully and a preview's line looks like it would, read it with `expand` "
                "and cite it if it helps. Reads the memory; the query is logged so that feedback can refer to it.",
                read_only=True,
                idempotent=False,  # each call is a new query id
            ),
            spec(
                feedback,
                FeedbackArgs,
                FeedbackOut,
                "Say what helped",
                "Tell the memory what helped: `answer` is your final answer, whose [n] citations mark the chunks you "
                "used (the other chunks you were shown count as not useful); `rating` +1 or -1 from the user; "
                "`correction` the right answer when yours was wrong. Cite only the [n] that `context` gave for this "
                "query_id: the result lists citations that were not in that context (they label nothing). Posting "
                "again on the same query replaces what was said before, and the result says what it replaced.",
                read_only=False,
                destructive=True,  # replaces the query's earlier feedback
            ),
            spec(
                capture,
                CaptureArgs,
                CaptureOut,
                "Offer an exchange",
                "Offer a finished exchange (the user's turn and your answer) to the memory: facts worth keeping are "
                "stored after the capture gates (secrets, chit-chat and duplicates are refused). Waits up to "
                f"{CAPTURE_WAIT_S:g} s for the decision; while it is pending, `capture_result` reads it later.",
                read_only=False,
                destructive=True,  # a new fact marks an older one it restates superseded
                idempotent=False,
            ),
            spec(
                capture_result,
                CaptureResultArgs,
                CaptureOut,
                "What became of a capture",
                "What the capture gates decided for a capture id: pending, stored (the facts' chunk ids), duplicate, "
                "rejected (the gate and rule that refused it) or failed.",
                read_only=True,
            ),
            spec(
                remember,
                RememberArgs,
                RememberOut,
                "Remember a note",
                "Store a note in the memory (scrubbed of secrets, chunked, deduplicated) under a name made from its "
                "title. The same title replaces the earlier note of that title; the title is the note's heading.",
                read_only=False,
                destructive=True,  # the same title replaces the earlier note
            ),
            spec(
                expand,
                ExpandArgs,
                ChunkOut,
                "Read a preview",
                "Read one of the previews `context` listed after its chunks, whole: query_id and its n. Cite it as [n] "
                "in your answer if it helps; read and not cited, it counts as not useful. Only the n that `context` "
                "listed for that query_id can be read. Marks the preview as read in the query's log.",
                read_only=False,
                destructive=False,
                idempotent=True,
            ),
            spec(
                staging_file,
                StagingArgs,
                None,
                "The staging file",
                "The staging file of a query this server answered: the markdown listing every candidate the "
                "selector saw, for a person to open.",
                read_only=True,
            ),
        )
    }

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[s.tool for s in specs.values()])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        s = specs.get(params.name)
        try:
            if s is None:
                raise ToolFailure(f"unknown tool {params.name!r}; the tools are {', '.join(specs)}")
            try:
                args = s.args.model_validate(params.arguments or {})
            except ValidationError as e:
                first = e.errors()[0]
                raise ToolFailure(f"{'.'.join(map(str, first['loc'])) or 'arguments'}: {first['msg']}") from None
            text, structured = await anyio.to_thread.run_sync(s.run, args)
        except ToolFailure as e:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(e))], is_error=True)
        except Exception as e:  # noqa: BLE001 - a tool must answer in one line, never take the server down
            log.exception("tool %s failed", params.name)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"{type(e).__name__}: {e}".splitlines()[0])], is_error=True
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)

    return Server(
        "pai-brain",
        version=version(),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
