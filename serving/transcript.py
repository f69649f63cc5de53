"""Capture from a coding assistant's turn-end hook: the last exchange of its transcript (JSONL of turns) is
posted to /capture, and each memory query it made during that exchange gets the final answer as feedback,
so the answer's [n] citations label the log without anyone thinking about it.

The transcript format is the one Claude Code writes (one JSON object per line: `type` "user" or "assistant",
`message.content` a string or a list of blocks: `text`, `tool_use`, `tool_result`); a Stop hook receives
`{"transcript_path": ..., "session_id": ...}` on stdin. The memory's query ids are read from the results of
the `context` tool (`pai mcp`), whose text starts `query_id: N`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .client import Client, ClientError

QUERY_ID = re.compile(r"^query_id: (\d+)", re.M)
MAX_TRANSCRIPT_BYTES = 50_000_000


@dataclass
class Exchange:
    user: str
    assistant: str
    query_ids: list[int] = field(default_factory=list)


def _blocks(message: dict) -> list:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _texts(blocks: list, kind: str = "text") -> list[str]:
    return [b["text"] for b in blocks if b.get("type") == kind and isinstance(b.get("text"), str)]


def _context_tool_ids(blocks: list) -> set[str]:
    """The ids of this turn's calls to the memory's `context` tool (`mcp__pai-brain__context`, or `context`)."""
    return {
        b["id"]
        for b in blocks
        if b.get("type") == "tool_use"
        and isinstance(b.get("id"), str)
        and isinstance(b.get("name"), str)
        and (b["name"] == "context" or b["name"].endswith("__context"))
    }


def _tool_result_texts(blocks: list, ids: set[str]) -> list[str]:
    """Texts of the results of the calls in `ids` (another tool's output may hold any text)."""
    out = []
    for b in blocks:
        if b.get("type") != "tool_result" or b.get("tool_use_id") not in ids:
            continue
        c = b.get("content")
        out += (
            [c] if isinstance(c, str) else _texts([x for x in c if isinstance(x, dict)]) if isinstance(c, list) else []
        )
    return out


def last_exchange(path: Path) -> Exchange | None:
    """The last human turn, the assistant's text after it, and the memory queries made in between; None when
    the transcript has no finished exchange. Lines that are not JSON objects are skipped."""
    if path.stat().st_size > MAX_TRANSCRIPT_BYTES:
        raise ValueError(f"{path}: over {MAX_TRANSCRIPT_BYTES:,} bytes")
    turns = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("type") in ("user", "assistant"):
                turns.append((entry["type"], _blocks(entry.get("message") or {})))
    human = [i for i, (kind, blocks) in enumerate(turns) if kind == "user" and _texts(blocks)]
    if not human:
        return None
    start = human[-1]
    user = "\n".join(_texts(turns[start][1])).strip()
    answer, query_ids, calls = [], [], set()
    for kind, blocks in turns[start + 1 :]:
        if kind == "assistant":
            answer += _texts(blocks)
            calls |= _context_tool_ids(blocks)
        else:
            for t in _tool_result_texts(blocks, calls):
                m = QUERY_ID.match(t)  # the first line of the context tool's answer
                if m:
                    query_ids.append(int(m.group(1)))
    assistant = "\n".join(answer).strip()
    if not user or not assistant:
        return None
    return Exchange(user, assistant, list(dict.fromkeys(query_ids)))


def post_exchange(client: Client, ex: Exchange, source: str, session: str | None) -> dict:
    """Capture the exchange; feed its answer back to every memory query it made. Returns what was done."""
    done: dict = {"captured": None, "feedback": [], "errors": []}
    try:
        done["captured"] = client.capture(ex.user, ex.assistant, source=source, session=session).id
    except ClientError as e:
        done["errors"].append(f"capture: {e}")
    for qid in ex.query_ids:
        try:
            r = client.feedback(qid, answer=ex.assistant)
            done["feedback"].append({"query_id": qid, "used_ranks": r.get("used_ranks", [])})
        except ClientError as e:
            done["errors"].append(f"feedback {qid}: {e}")
    return done
