"""Captured exchanges as conversation: every exchange of a session, as it was said, in one conversation
document chunked like any chat log (`retrieval/dialogue.py`), so a later query finds what was said, dated, with
its speakers, beside the facts taken out of it.

The document is the session's exchanges in the order they came, each under its own heading (the exchange's time,
UTC, then the session's name), its user turn then its assistant turn: a chunk never mixes two exchanges, every
chunk's first line names the exchange's date and time, the session and the speakers
(`[2026-12-05 14:03 · session s1 · user, assistant]`), and an exchange added later leaves the earlier chunks as they
were (ingest keeps them and embeds only the new exchange's). Exchanges without a session are kept per source and
day."""

from __future__ import annotations

import re

from ..corpus.ingest import ingest_documents
from ..corpus.sources import Document
from ..corpus.transcripts import one_paragraph
from ..embed import Embedder
from ..params import IngestParams, SearchParams
from ..scopes import DEFAULT

SESSION_PATH = "capture:"  # documents.path of every captured conversation (no file: never walked)
SPEAKERS = ("user", "assistant")
MAX_NAME_CHARS = 40  # a session's name as the chunk header shows it (the document's source keeps it whole)
_NAME_WORD = re.compile(r"[\w.:-]+")
# the conversation an exchange belongs to: its session, else its source's (or "capture") day
_CONVERSATION = """coalesce(nullif(btrim(session), ''),
                            coalesce(source, 'capture') || ' ' || to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'))"""


def header_name(session: str) -> str:
    """A session's name as a chat log heading can carry it: its words joined by "-", at most 40 characters."""
    return "-".join(_NAME_WORD.findall(session))[:MAX_NAME_CHARS].strip("-") or "capture"


def exchange_log(name: str, exchanges: list[tuple[str, str, str]]) -> str:
    """The chat log of (time, user text, assistant text) exchanges of session `name`: a heading per exchange."""
    out = []
    for when, *turns in exchanges:
        out.append(f"# {when} — Session {header_name(name)}")
        out += [f"{s}: {one_paragraph(t)}" for s, t in zip(SPEAKERS, turns) if t.strip()]
    return "\n\n".join(out) + "\n"


def store_exchange(
    conn, capture_id: int, ingest: IngestParams, search: SearchParams, embedder: Embedder, scope: str = DEFAULT
) -> str:
    """(Re)write the conversation document of capture `capture_id`'s session in `scope` with every exchange of
    that session up to this one; its source."""
    (name,) = conn.execute(f"SELECT {_CONVERSATION} FROM captures WHERE id = %s", (capture_id,)).fetchone()
    rows = conn.execute(
        f"""SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), user_text, assistant_text, created_at
            FROM captures WHERE scope = %s AND id <= %s AND {_CONVERSATION} = %s ORDER BY id""",
        (scope, capture_id, name),
    ).fetchall()
    text = exchange_log(name, [r[:3] for r in rows])
    doc = Document(f"capture:session:{name}", SESSION_PATH, text, "conversation", written=rows[-1][3])
    report = ingest_documents(conn, [doc], ingest, search, embedder, scope)
    if report.errors:
        raise RuntimeError(report.errors[0])
    return doc.source
