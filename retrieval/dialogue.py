"""Conversations as chunks: a chat log's turns windowed into chunks that say, in their own text, when, which
session and who.

A conversation document is markdown in one canonical shape: a heading per session that names its date (and
maybe "Session N"), then one paragraph per turn, `Speaker: text` (a paragraph that does not start with a
speaker continues the turn before it). `pai ingest` reads chat logs written so, and the transcript readers
(`retrieval/corpus/transcripts.py`) write JSONL transcripts into it. `is_chat_log` tells a chat log from an
ordinary note; only conversations are chunked here (notes keep `retrieval/chunking.py`).

A chunk is a window of adjacent turns of one session, never a turn cut in two (only a turn over
`LINE_LIMIT` times the chunk size is cut into pieces, each with the header): turns are added while the
window is under the target size; a question keeps its answer; small turns (sign-offs, "haha") ride along
with their neighbours and never take a chunk of their own. Its first line is the header
`[2023-05-08 13:56 · session 3 · Caroline, Melanie]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from .chunking import LINE_LIMIT, MAX_HEADING_CHARS, Chunk, approx_tokens

SMALL_TURN_TOKENS = 12  # a turn this short ("Bye! Take care!") never starts or ends a window alone
MIN_TURNS = 2  # a markdown file with fewer turns is a note, not a chat log
MIN_TURN_SHARE = 0.8  # ... and one whose paragraphs are less than this share turns

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_TURN = re.compile(r"^([A-Za-z][\w.'-]{0,30}(?: [A-Za-z][\w.'-]{0,30}){0,2}):[ \t]+(\S.*)", re.S)
_HEADER = re.compile(r"^\[([^\]\n]*) · (session [^\]\n·]*) · [^\]\n]*\]")
_SESSION = re.compile(r"\bsession[ \t]*#?(\d+)\b", re.I)
_SESSION_NAME = re.compile(r"\bsession[ \t]+([\w.:-]{1,40})(?![\w.:-])", re.I)  # "Session s1" (a captured one)
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{1,2}):(\d{2}))?")
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\s*([ap]\.?m\.?)?", re.I)
_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})\b")
_MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str
    line: int  # 1-based line of its first paragraph
    end_line: int


@dataclass(frozen=True)
class Session:
    heading: str  # the heading's text, as written
    label: str  # "session 3"
    when: str | None  # "2023-05-08 13:56", or None when the heading names no date
    turns: list[Turn]


def parse_when(text: str) -> str | None:
    """The date (and time, if any) a heading names, as "YYYY-MM-DD[ HH:MM]"; None if it names none."""
    day = None
    if m := _ISO.search(text):
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
        day = (y, mo, d)
        if m.group(4):
            return _fmt(day, int(m.group(4)), int(m.group(5)))
    elif m := _DAY_MONTH_YEAR.search(text):
        day = _day(m.group(3), m.group(2), m.group(1))
    elif m := _MONTH_DAY_YEAR.search(text):
        day = _day(m.group(3), m.group(1), m.group(2))
    if day is None:
        return None
    if c := _CLOCK.search(_ISO.sub("", text)):
        hour, minute, ampm = int(c.group(1)), int(c.group(2)), (c.group(3) or "").lower()
        hour = hour % 12 + (12 if ampm.startswith("p") else 0) if ampm else hour
        return _fmt(day, hour, minute)
    return _fmt(day)


def _day(year: str, month: str, day: str) -> tuple[int, int, int] | None:
    mo = month[:3].lower()
    return (int(year), _MONTHS.index(mo) + 1, int(day)) if mo in _MONTHS else None


def _fmt(day: tuple[int, int, int], hour: int | None = None, minute: int | None = None) -> str | None:
    try:
        when = datetime(*day, hour or 0, minute or 0)
    except ValueError:
        return None
    return when.strftime("%Y-%m-%d %H:%M" if hour is not None else "%Y-%m-%d")


def parse_chat_log(text: str) -> list[Session]:
    """The sessions of a canonical chat log (see the module docstring); text before the first heading is a
    session of its own."""
    lines = text.split("\n")
    sessions: list[Session] = []
    heading, turns, para, start = "", [], [], 0

    def flush_para(end: int) -> None:
        nonlocal para
        if para:
            body = "\n".join(para).strip()
            m = _TURN.match(body)
            if m:
                turns.append(Turn(m.group(1), m.group(2).strip(), start + 1, end))
            elif turns:
                t = turns[-1]
                turns[-1] = Turn(t.speaker, f"{t.text}\n\n{body}", t.line, end)
        para = []

    def flush_session() -> None:
        if turns:
            m = _SESSION.search(heading) or _SESSION_NAME.search(heading)
            label = f"session {m.group(1)}" if m else f"session {len(sessions) + 1}"
            sessions.append(Session(heading[:MAX_HEADING_CHARS], label, parse_when(heading), list(turns)))

    for i, line in enumerate(lines):
        if h := _HEADING.match(line):
            flush_para(i)
            flush_session()
            heading, turns = h.group(2), []
        elif not line.strip():
            flush_para(i)
        else:
            if not para:
                start = i
            para.append(line)
    flush_para(len(lines))
    flush_session()
    return sessions


def is_chat_log(text: str) -> bool:
    """A markdown file is a chat log when a heading names a date and nearly all its paragraphs are turns."""
    paras = [p.strip() for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    headings = [p for p in paras if _HEADING.match(p.split("\n", 1)[0])]
    body = [p for p in paras if not _HEADING.match(p.split("\n", 1)[0])]
    n_turns = sum(1 for p in body if _TURN.match(p))
    if n_turns < MIN_TURNS or n_turns < MIN_TURN_SHARE * len(body):
        return False
    return any(parse_when(_HEADING.match(h.split("\n", 1)[0]).group(2)) for h in headings)


def header(session: Session, speakers: list[str]) -> str:
    """The line every chunk of a conversation starts with: when, which session, who."""
    return f"[{session.when or 'undated'} · {session.label} · {', '.join(speakers)}]"


def session_key(source: str, text: str) -> tuple[str, str] | None:
    """(source, "session 3") for a conversation's chunk (its text starts with the header), else None."""
    m = _HEADER.match(text)
    return (source, m.group(2)) if m else None


def conversation_order(ids: list[int], keyword_rank: dict[int, int], weight: float, k: int) -> list[int]:
    """`ids` (a conversation's candidates in the general order) ordered by reciprocal rank of that order and the
    keyword side's rank over the whole store: 1 / (k + position) + weight / (k + keyword rank). The keyword side
    ranks by the store's own word statistics, what tells a conversation's rare words (a name, a place, a hobby)
    from its small talk; BM25 over 20 candidates alone cannot."""
    score = {
        i: 1 / (k + n) + (weight / (k + keyword_rank[i]) if i in keyword_rank else 0.0) for n, i in enumerate(ids, 1)
    }
    return sorted(ids, key=lambda i: -score[i])


def windows(turns: list[Turn], target: int, max_tokens: int) -> list[list[Turn]]:
    """Adjacent turns grouped: added while the window is under `target` tokens; a question keeps the turn
    that answers it and a small turn never stands alone (it joins the window before it), up to `max_tokens`."""
    out: list[list[Turn]] = []
    cur: list[Turn] = []
    for t in turns:
        size = sum(_tokens(x) for x in cur)
        asked = bool(cur) and cur[-1].text.rstrip().endswith("?") and cur[-1].speaker != t.speaker
        keep = (asked or _tokens(t) <= SMALL_TURN_TOKENS) and size + _tokens(t) <= max_tokens
        if cur and size + _tokens(t) > target and not keep:
            out.append(cur)
            cur = []
        cur.append(t)
    if cur:
        if out and sum(_tokens(x) for x in cur) <= SMALL_TURN_TOKENS:
            out[-1] = out[-1] + cur
        else:
            out.append(cur)
    return out


def chunk_conversation(text: str, target: int, max_tokens: int, title: str | None = None) -> list[Chunk]:
    """A chat log's chunks: windows of `target` tokens, each headed by its session's date, label and speakers."""
    chunks = []
    for s in parse_chat_log(text):
        for w in windows(s.turns, target, max_tokens):
            speakers = list(dict.fromkeys(t.speaker for t in w))
            head = header(s, speakers)
            body = "\n".join(f"{t.speaker}: {t.text}" for t in w)
            for piece in _pieces(body, max_tokens * LINE_LIMIT):
                chunks.append(Chunk(f"{head}\n{piece}", w[0].line, w[-1].end_line, s.heading or None, title, 1))
    return chunks


def _tokens(t: Turn) -> int:
    return approx_tokens(f"{t.speaker}: {t.text}")


def _pieces(body: str, max_tokens: int) -> list[str]:
    """A window over `max_tokens` (one enormous turn) in pieces, cut at whitespace where there is some."""
    width, out = max_tokens * 4, []
    while body:
        cut = len(body) if len(body) <= width else body.rfind(" ", width // 2, width) + 1 or width
        out.append(body[:cut].strip())
        body = body[cut:]
    return [p for p in out if p]
