"""The MCP tools' arguments and results (`serving.mcp_server`): pydantic models whose JSON schemas are what a client
and a model read, each parameter with its description and limits. Arguments are strict and closed, like the HTTP
bodies (`serving.schemas`, whose text types they share): `true` is not 1, "4" is not 4, a misspelt parameter is an
error, and a string is taken as sent (`"[1]"` and `"null"` are text, never parsed as JSON)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .client import Context
from .schemas import Id, Line, Rating, Scope, Text

MAX_ANSWER = 50_000  # /feedback's answer and correction, /capture's turns as the tools take them
MAX_NOTE = 200_000  # a note a tool call stores within a client's request timeout (60 s); a longer one: pai ingest


class Args(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


SCOPE = (
    "the memory's scope, e.g. 'alice/notes': lowercase letters, digits, '.', '_', '-', up to 3 segments joined by "
    "'/', at most 64 characters. Default: the one this server was started with, else the token's default"
)


class ContextArgs(Args):
    query: Line = Field(max_length=4000, description="the question, in the user's words (1 to 4,000 characters)")
    k: int | None = Field(
        None,
        ge=1,
        le=20,
        description="keep at most the first k chunks of the context (1 to 20). Default: every chunk the service "
        "chose, as many as fit its token budget (at least 3). Chunks cut by k are not shown to you and are "
        "never counted against the memory.",
    )
    scope: Scope | None = Field(None, description=SCOPE + "; the scopes shared with it are read too")


class FeedbackArgs(Args):
    query_id: Id = Field(description="the query_id that `context` returned")
    answer: Line | None = Field(
        None,
        max_length=MAX_ANSWER,
        description="your final answer as given to the user, with its [n] citations (up to 50,000 characters)",
    )
    rating: Rating | None = Field(None, description="the user's verdict: 1 (helpful) or -1 (not)")
    correction: Line | None = Field(
        None, max_length=MAX_ANSWER, description="the right answer, when yours was wrong (up to 50,000 characters)"
    )
    scope: Scope | None = Field(None, description="the scope `context` ran in for this query_id; " + SCOPE)


class CaptureArgs(Args):
    user: Text = Field(max_length=MAX_ANSWER, description="the user's turn (up to 50,000 characters)")
    assistant: Line = Field(
        max_length=MAX_ANSWER, description="your answer, where facts come from (up to 50,000 characters)"
    )
    source: Text | None = Field(None, max_length=500, description="who sends it, e.g. the client's name")
    session: Text | None = Field(None, max_length=500, description="the conversation it belongs to")
    scope: Scope | None = Field(None, description="where its facts are stored; " + SCOPE)


class CaptureResultArgs(Args):
    capture_id: Id = Field(description="the id `capture` returned")


class RememberArgs(Args):
    text: Line = Field(
        max_length=MAX_NOTE,
        description="the note, markdown (up to 200,000 characters; a longer document: `pai ingest FILE`, which shows progress)",
    )
    title: Text | None = Field(
        None,
        max_length=500,
        description="the note's title and heading (up to 500 characters); the same title replaces the earlier "
        "note of that title. Untitled notes are named by their text.",
    )
    scope: Scope | None = Field(None, description="where the note is stored; " + SCOPE)


class ExpandArgs(Args):
    query_id: Id = Field(description="the query_id that `context` returned")
    n: int = Field(ge=1, le=1000, description="the [n] of one of that query's previews")
    scope: Scope | None = Field(None, description="the scope `context` ran in for this query_id; " + SCOPE)


class StagingArgs(Args):
    query_id: Id = Field(description="a query_id that `context` returned in this session")
    scope: Scope | None = Field(None, description="the scope `context` ran in for this query_id; " + SCOPE)


class ChunkOut(BaseModel):
    n: int = Field(description="cite it as [n]")
    chunk_id: int
    source: str
    heading: str | None
    start_line: int | None
    end_line: int | None
    text: str
    date: str | None = Field(None, description="when its document was written (ISO 8601, UTC)")
    newer_than: list[int] = Field(default_factory=list, description="the [n] of near chunks it was written after")


class PreviewOut(BaseModel):
    n: int = Field(description="`expand` it with this n; cite it as [n] once read")
    chunk_id: int
    source: str
    line: str = Field(description="where it is from, its heading, its first words")


class LearnedOut(BaseModel):
    question: str
    answer: str


class ContextOut(BaseModel):
    query_id: int = Field(description="give it to `feedback`")
    selector: str = Field(description="the selector version that chose the chunks")
    chunks: list[ChunkOut]
    previews: list[PreviewOut] = Field(
        default_factory=list, description="the next candidates, one line each: `expand` reads one whole"
    )
    learned: list[LearnedOut] = Field(description="answers the user approved to similar questions")

    @classmethod
    def of(cls, ctx: Context) -> ContextOut:
        return cls(
            query_id=ctx.query_id,
            selector=ctx.selector,
            chunks=[ChunkOut(**vars(c)) for c in ctx.chunks],
            previews=[PreviewOut(**vars(p)) for p in ctx.previews],
            learned=[LearnedOut(question=q["question"], answer=q["answer"]) for q in ctx.learned],
        )


class FeedbackOut(BaseModel):
    query_id: int
    used_ranks: list[int] = Field(description="the [n] now labelled used")
    not_shown: list[int] = Field(description="cited [n] that were not in the context given: no label")
    unknown: list[int] = Field(description="cited [n] that are no candidate of this query: no label")
    answer_recorded: bool = Field(description="false when every citation missed: the earlier feedback stands")
    replaced: dict = Field(description="the earlier feedback this one replaced: used_ranks, rating, answer, correction")
    trial: dict | None = Field(None, description="the trial this feedback decided, if any")


class CaptureOut(BaseModel):
    id: int = Field(description="give it to `capture_result`")
    status: Literal["pending", "stored", "duplicate", "rejected", "failed"]
    gate: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    fact_ids: list[int] = Field(default_factory=list, description="chunk ids of the stored facts")
    duplicate_of: list[int] = Field(default_factory=list, description="chunk ids its facts duplicated")

    def summary(self) -> tuple[str, dict]:
        if self.status == "pending":
            text = f"capture {self.id}: pending; `capture_result` with capture_id {self.id} says what became of it"
        else:
            why = ", ".join(x for x in (self.gate and f"gate {self.gate}", self.reason) if x)
            facts = f", facts {self.fact_ids}" if self.fact_ids else ""
            text = f"capture {self.id}: {self.status}" + (f" ({why})" if why else "") + facts
        return text, self.model_dump()


class RememberOut(BaseModel):
    source: str = Field(description="the note's name in the memory")
    chunks_inserted: int
    chunks_kept: int
    duplicates_skipped: int = Field(description="exact duplicates of stored chunks, not stored")
    near_linked: int = Field(0, description="stored, linked to a near chunk of another note")
    redactions: dict[str, int] = Field(description="secrets replaced by [REDACTED:KIND], by kind")


def feedback_text(out: FeedbackOut) -> str:
    """What `feedback` says to the assistant: what it labelled, which citations missed, what it replaced."""
    cites = lambda ns: ", ".join(f"[{n}]" for n in ns)  # noqa: E731
    if not out.answer_recorded:
        parts = [f"nothing labelled for query {out.query_id}: no citation of the answer was in its context"]
    else:
        parts = [f"recorded for query {out.query_id}" + (f": used {cites(out.used_ranks)}" if out.used_ranks else "")]
    if out.not_shown:
        parts.append(f"{cites(out.not_shown)} not in the context you were given (no label)")
    if out.unknown:
        parts.append(f"{cites(out.unknown)} no candidate of this query (no label)")
    if not out.answer_recorded:
        parts.append("cite only the [n] that `context` returned with this query_id")
    if out.replaced:
        short = lambda v: repr(v if len(str(v)) <= 60 else f"{str(v)[:57]}...")  # noqa: E731 - an answer may be long
        was = {k: cites(v) or "none" if k == "used_ranks" else short(v) for k, v in out.replaced.items()}
        parts.append("replaced the earlier " + ", ".join(f"{k} {v}" for k, v in was.items()))
    return "; ".join(parts)
