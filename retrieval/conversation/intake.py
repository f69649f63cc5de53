"""An exchange offered to capture, before the gates: decoded and checked (a one-line `CaptureInputError`), scrubbed
and recorded pending in `captures`; the pending queue the capture worker takes up (retrieval/conversation/capture.py)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from ..corpus.sources import text_problem
from ..scopes import DEFAULT
from ..scrub import scrub_all


class CaptureInputError(ValueError):
    """An exchange that cannot be captured; `status` is the HTTP status the service answers with."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Exchange:
    user: str
    assistant: str
    source: str | None = None
    session: str | None = None


def parse_exchange(obj: Any, max_chars: int) -> Exchange:
    """An exchange from decoded JSON, or a one-line CaptureInputError (413 when a text is too long)."""
    if not isinstance(obj, dict):
        raise CaptureInputError("expected a JSON object with user and assistant")
    unknown = sorted(set(obj) - {"user", "assistant", "source", "session"})
    if unknown:
        raise CaptureInputError(f"{unknown[0]}: unknown field")
    for key in ("user", "assistant", "source", "session"):
        value = obj.get(key)
        if value is None and key in ("source", "session"):
            continue
        if not isinstance(value, str):
            raise CaptureInputError(f"{key}: {'missing' if value is None else 'must be a string'}")
        if why := text_problem(value):
            raise CaptureInputError(f"{key}: {why}")
        limit = max_chars if key in ("user", "assistant") else 500
        if len(value) > limit:
            raise CaptureInputError(f"{key}: {len(value):,} characters is over the {limit:,}-character limit", 413)
    if not obj["assistant"].strip():
        raise CaptureInputError("assistant: must not be blank")
    return Exchange(obj["user"], obj["assistant"], obj.get("source"), obj.get("session"))


def submit(conn: psycopg.Connection, ex: Exchange, scope: str = DEFAULT) -> int:
    """Scrub the exchange and record it as pending in `scope` (its facts are stored there); its id."""
    # together: a secret found in one turn is redacted in the other too (a bare copy of it)
    user, assistant, source, session = scrub_all([ex.user, ex.assistant, ex.source, ex.session])
    redactions = sum((r.counts for r in (user, assistant, source, session) if r), Counter())
    (cid,) = conn.execute(
        """INSERT INTO captures (source, session, user_text, assistant_text, redactions, scope)
           VALUES (%s, %s, %s, %s, %s, %s) RETURNING id""",
        (
            source and source.text,
            session and session.text,
            user.text,
            assistant.text,
            json.dumps(dict(redactions)),
            scope,
        ),
    ).fetchone()
    return cid


def pending_count(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM captures WHERE status = 'pending'").fetchone()[0]


def pending_ids(conn: psycopg.Connection) -> list[int]:
    return [i for (i,) in conn.execute("SELECT id FROM captures WHERE status = 'pending' ORDER BY id")]
