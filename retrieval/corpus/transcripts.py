"""Chat transcripts in JSONL read into one conversation document: the generic `{"session", "time", "speaker",
"text"}` a line, or the assistant transcript the turn-end hook reads (Claude Code: `type` "user"/"assistant",
`message.content` a string or text blocks, `sessionId`, `timestamp`; tool calls and results are not turns).

The document's text is the canonical chat log `retrieval/dialogue.py` chunks (a dated heading per session, one
paragraph per turn), so a transcript and a markdown chat log are stored alike. A line that cannot be read (over
the size cap, not JSON, NUL, no text) is one error line and the rest goes on; a last line still being written
(no newline, not JSON yet) is left for the next ingest. Turns keep the file's order; a session's heading names
its earliest time, so out-of-order timestamps move nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..dialogue import parse_when
from .sources import CORPUS_SUFFIXES, Document, InputError, read_documents, resolved, text_problem

ASSISTANT_TYPES = ("user", "assistant")
_SPEAKER_WORD = re.compile(r"[A-Za-z][\w.'-]{0,30}")


def transcript_format(record: object) -> str | None:
    """ "generic" or "assistant" when a JSONL file's first record is a transcript's, else None (a corpus)."""
    if not isinstance(record, dict) or any(k in record for k in ("_id", "id", "doc_id", "candidates")):
        return None
    if "speaker" in record and "text" in record:
        return "generic"
    if record.get("type") in (*ASSISTANT_TYPES, "summary") and ("message" in record or "summary" in record):
        return "assistant"
    return None


def read_any(path: Path, max_bytes: int) -> Iterator[Document | InputError]:
    """The documents of one file (`sources.read_documents`), a JSONL transcript read as one conversation."""
    fmt = _sniff(path, max_bytes) if path.suffix.lower() in CORPUS_SUFFIXES else None
    if fmt is None:
        yield from read_documents(path, max_bytes)
        return
    written = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    yield from read_transcript(path, fmt, max_bytes, resolved(path), written)


def _sniff(path: Path, max_bytes: int, lines: int = 5) -> str | None:
    """The transcript format of a JSONL file, read from the first of its first `lines` lines that parses."""
    try:
        with open(path, "rb") as f:
            for raw in f:
                if not raw.strip() or len(raw) > max_bytes:
                    continue
                try:
                    return transcript_format(json.loads(raw.decode("utf-8")))
                except ValueError:
                    lines -= 1
                    if lines == 0:
                        return None
    except OSError:
        return None
    return None


def read_transcript(path: Path, fmt: str, max_bytes: int, abspath: str, written: datetime) -> Iterator:
    """The transcript as one conversation document, after one InputError per line it could not read."""
    sessions: dict[str, list[tuple[str | None, str, str]]] = {}  # session -> (time, speaker, text) in file order
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            if len(raw) > max_bytes:
                yield InputError(f"{path}:{n}: line of {len(raw):,} bytes is over the {max_bytes:,}-byte cap")
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                if not raw.endswith(b"\n"):
                    break  # the last line, still being written: the next ingest reads it whole
                yield InputError(
                    f"{path}:{n}: {'not UTF-8 text' if isinstance(e, UnicodeDecodeError) else 'invalid JSON'}"
                )
                continue
            turn = _turn(record, fmt)
            if isinstance(turn, str):
                yield InputError(f"{path}:{n}: {turn}")
            elif turn is not None:
                session, when, speaker, text = turn
                sessions.setdefault(session, []).append((when, speaker, text))
    if not sessions:
        yield InputError(f"{path}: no turns")
        return
    yield Document(abspath, abspath, chat_log(sessions), "conversation", None, written)


def _turn(record: object, fmt: str) -> tuple[str, str | None, str, str] | str | None:
    """(session, time, speaker, text), or why the line is refused, or None for a line that is no turn."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if fmt == "assistant":
        if record.get("type") not in ASSISTANT_TYPES:
            return None
        text = "\n".join(_texts(record.get("message"))).strip()
        speaker, session, when = record["type"], record.get("sessionId"), record.get("timestamp")
    else:
        text, speaker, session, when = (
            record.get("text"),
            record.get("speaker"),
            record.get("session"),
            record.get("time"),
        )
        if not isinstance(text, str):
            return "a turn needs a text string"
    if not text.strip():
        return None
    for value in (text, str(speaker), str(session), str(when)):
        if why := text_problem(value):
            return f"turn {why}"
    return str(session if session is not None else 1)[:200], str(when) if when else None, _speaker(speaker), text


def _texts(message: object) -> list[str]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [content]
    blocks = content if isinstance(content, list) else []
    return [
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def _speaker(value: object) -> str:
    """A name the chat log can hold: up to three words of letters, digits, . ' -; else "unknown"."""
    words = _SPEAKER_WORD.findall(str(value)) if isinstance(value, (str, int)) else []
    return " ".join(words[:3]) or "unknown"


def chat_log(sessions: dict[str, list[tuple[str | None, str, str]]]) -> str:
    """The canonical chat log: a heading per session (its name and earliest time), a paragraph per turn."""
    out = []
    for name, turns in sessions.items():
        times = sorted(parse_when(t) or t for t, _, _ in turns if t)
        name = " ".join(name.split())
        label = name if name.lower().startswith("session") else f"Session {name}"
        out.append(f"# {label} — {times[0] if times else 'undated'}")
        out += [f"{speaker}: {one_paragraph(text)}" for _, speaker, text in turns]
    return "\n\n".join(out) + "\n"


def one_paragraph(text: str) -> str:
    """A turn's text as one paragraph: blank lines dropped, a line that would read as a heading escaped."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return "\n".join("\\" + ln.lstrip() if ln.lstrip().startswith("#") else ln for ln in lines)
