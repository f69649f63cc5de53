"""The HTTP API's request bodies: what `/query`, `/expand`, `/feedback`, `/ingest` and `/capture` accept, checked by
pydantic before a handler runs. Every body is strict (`true` is not 1, "4" is not 4) and closed (a misspelt
field is an error, not silently dropped); text holds only what Postgres can store (no NUL, no lone
surrogate), lines must not be blank, ids fit a bigint, and no text is longer than the body limit.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from retrieval.corpus.sources import text_problem
from retrieval.scopes import MAX_CHARS, check

MAX_BODY_BYTES = 2_000_000
MAX_ID = 2**63 - 1  # ids are bigint


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
# a scope name (retrieval.scopes): lowercase ASCII segments joined by '/'; None: the caller's token's default scope
Scope = Annotated[str, Field(max_length=MAX_CHARS), AfterValidator(check)]
SCOPE_HELP = "the scope, e.g. 'alice/notes' (default: the token's default scope, else 'default')"


def _plus_minus_one(value: int) -> int:
    if value not in (-1, 1):
        raise ValueError("must be +1 or -1")
    return value


Rating = Annotated[int, Field(strict=True), AfterValidator(_plus_minus_one)]  # Literal[-1, 1] lets `true` through


class QueryIn(BaseModel):
    # strict: `true` is not 1, "4" is not 4; forbid: a misspelt field is an error, not silently dropped
    model_config = ConfigDict(strict=True, extra="forbid")
    query: Line = Field(min_length=1, max_length=4000)
    inline: bool | None = Field(None, description="wait for the selector (default: the server's --inline)")
    k: int | None = Field(None, ge=1, le=100, description="give at most the first k chunks of the context")
    scope: Scope | None = Field(None, description=SCOPE_HELP + "; the scopes shared with the token are read too")


class ExpandIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    query_id: Id
    n: int = Field(ge=1, le=1000, description="the [n] of one of the query's previews")
    scope: Scope | None = Field(None, description="the query's scope, when the caller names it")


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
    scope: Scope | None = Field(None, description="the query's scope, when the caller names it")


class IngestIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")  # a misspelt field is an error, not lost
    source: Line = Field(min_length=1, max_length=500, description="a name for the note, unique per note")
    text: Line = Field(min_length=1, max_length=MAX_BODY_BYTES)
    kind: Literal["markdown", "text", "code"] = "markdown"
    title: Text | None = Field(None, max_length=500)
    scope: Scope | None = Field(None, description=SCOPE_HELP)


class CaptureIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    user: Text = Field(max_length=MAX_BODY_BYTES, description="the user's turn")
    assistant: Line = Field(max_length=MAX_BODY_BYTES, description="the assistant's answer, where facts come from")
    source: Text | None = Field(None, max_length=500, description="who sends it (a client name)")
    session: Text | None = Field(None, max_length=500, description="the conversation it belongs to")
    scope: Scope | None = Field(None, description=SCOPE_HELP + "; its facts are stored there")
