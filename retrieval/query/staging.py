"""The staging file: one human-readable markdown file per query, listing the candidates.

What a person reads (query, `**source** (score)`, line range, heading path, the day its document was written and
which near candidates it is newer than, text as a blockquote) is backed by one JSON comment per candidate, so
`parse(render(x)) == x` exactly.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from pathlib import Path

from ..scopes import DEFAULT
from ..scrub import scrub
from .search import Candidate, SearchResult, newer_than

VERSION = "pai-staging/1"
_HEADER = re.compile(r"^<!-- pai-staging (\{.*\}) -->$")
_META = re.compile(r"^<!-- candidate (\{.*\}) -->$")


class StagingParseError(ValueError):
    """Not a staging file this version can read."""


@dataclass(frozen=True)
class StagingFile:
    query_id: str
    query: str
    created: str  # ISO 8601, UTC
    threshold: float
    candidates: tuple[Candidate, ...]  # those above threshold, in rank order
    below_threshold: int
    scope: str = DEFAULT  # the scope of the query (a file written before scopes: the default one)
    context: tuple[int, ...] = ()  # the ranks given to the consumer whole, in the order given
    previews: tuple[int, ...] = ()  # the ranks listed after them as one-line previews (`expand` reads one whole)


def from_result(
    result: SearchResult,
    query_id: str | None = None,
    now: datetime | None = None,
    scope: str = DEFAULT,
    context: list[int] | None = None,
    previews: list[int] | None = None,
) -> StagingFile:
    """The staging file of a search; `context` and `previews`, the ranks the consumer was given whole and as
    previews (none when only the search ran: `pai query`)."""
    now = now or datetime.now(UTC)
    return StagingFile(
        query_id=query_id or secrets.token_hex(6),
        query=scrub(result.query).text,  # the candidates were scrubbed at ingest
        created=now.isoformat(timespec="seconds"),
        threshold=result.threshold,
        candidates=tuple(result.above),
        below_threshold=result.below_threshold,
        scope=scope,
        context=tuple(context or ()),
        previews=tuple(previews or ()),
    )


def _comment_json(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False).replace("--", "-\\u002d")  # "--" may not appear in a comment


def render(sf: StagingFile, display_root: str | None = None) -> str:
    first = sf.query.split("\n", 1)[0]
    head = {f.name: getattr(sf, f.name) for f in fields(sf) if f.name != "candidates"}
    out = [f"# Query: {first}", "", f"<!-- pai-staging {_comment_json({'version': VERSION, **head})} -->", ""]
    topped = sum(c.score < sf.threshold for c in sf.candidates)  # below it, kept to the floor (search.kept)
    out.append(
        f"{len(sf.candidates)} candidates at or above threshold {sf.threshold:g}"
        + (f" ({topped} below it, kept so the context holds its floor)." if topped else ".")
    )
    if sf.context:
        out.append(
            f"Given to the consumer: {', '.join(f'#{r}' for r in sf.context)}"
            + (f"; listed after them as previews: {', '.join(f'#{r}' for r in sf.previews)}." if sf.previews else ".")
        )
    given = {r: "in context" for r in sf.context} | {r: "preview" for r in sf.previews}
    newer = newer_than(list(sf.candidates))
    for c in sf.candidates:
        shown = c.source
        if display_root and shown.startswith(display_root.rstrip("/") + "/"):
            shown = shown[len(display_root.rstrip("/")) + 1 :]
        where = " › ".join(h for h in (c.parent_heading, c.heading) if h)
        out += [
            "",
            f"## {c.rank}. **{shown}** ({c.score:.3f})" + (f" · {given[c.rank]}" if c.rank in given else ""),
            f"*lines {c.start_line}–{c.end_line}*"
            + (f" · {where}" if where else "")
            + (f" · written {c.date[:10]}" if c.date else "")
            + (f" · newer than {', '.join(f'#{r}' for r in newer[c.rank])}" if c.rank in newer else ""),
            f"<!-- candidate {_comment_json({f.name: getattr(c, f.name) for f in fields(c) if f.name not in ('text', 'vector')})} -->",
            "",
        ]
        out += [f"> {line}" if line else ">" for line in c.text.split("\n")]
    out += ["", "---", "", f"*{sf.below_threshold} chunks below threshold — never enter context*", ""]
    return "\n".join(out)


def parse(text: str) -> StagingFile:
    lines = text.split("\n")
    header = next((m for line in lines if (m := _HEADER.match(line))), None)
    if header is None:
        raise StagingParseError("no pai-staging header comment")
    head = json.loads(header.group(1))
    if head.pop("version", None) != VERSION:
        raise StagingParseError(f"unsupported staging version (want {VERSION})")
    head |= {k: tuple(head[k]) for k in ("context", "previews") if k in head}
    candidates = []
    i = 0
    while i < len(lines):
        m = _META.match(lines[i])
        i += 1
        if not m:
            continue
        meta = json.loads(m.group(1))
        if i < len(lines) and lines[i] == "":
            i += 1
        body = []
        while i < len(lines) and lines[i].startswith(">"):
            body.append(lines[i][2:] if lines[i].startswith("> ") else lines[i][1:])
            i += 1
        candidates.append(Candidate(text="\n".join(body), **meta))
    return StagingFile(candidates=tuple(candidates), **head)


def write(sf: StagingFile, directory: Path, display_root: str | None = None) -> Path:
    day = sf.created[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", sf.query.lower()).strip("-")[:40] or "query"
    stamp = sf.created[11:19].replace(":", "")
    path = directory / day / f"{stamp}-{slug}-{sf.query_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".md.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(render(sf, display_root))
    tmp.replace(path)  # readers never see half a file
    return path


def read(path: Path) -> StagingFile:
    with open(path, encoding="utf-8", newline="") as f:
        return parse(f.read())


def _git(directory: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=pai", "-c", "user.email=pai@localhost", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit_batch(directory: Path, paths: list[Path], message: str) -> str | None:
    """Commit the given staging files in `directory` (a git repo, created if needed); return the sha."""
    if not paths:
        return None
    if not (directory / ".git").exists():
        _git(directory, "init", "-q")
    _git(directory, "add", "--", *[str(p.relative_to(directory)) for p in paths])
    _git(directory, "commit", "-q", "-m", message)
    return _git(directory, "rev-parse", "HEAD")


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def expired(directory: Path, before: date) -> list[Path]:
    """Staging files (and leftover .tmp files) in the day folders older than `before`; `write` names
    each folder by the query's UTC day. Other files and folders are never touched."""
    if not directory.is_dir():
        return []
    out = []
    for day in sorted(directory.iterdir()):
        if day.is_dir() and _DAY.fullmatch(day.name) and date.fromisoformat(day.name) < before:
            out += sorted(p for p in day.iterdir() if p.is_file() and p.name.endswith((".md", ".md.tmp")))
    return out


def remove(directory: Path, paths: list[Path]) -> None:
    """Delete staging files and the day folders they leave empty; in a git staging dir, commit the removal."""
    for p in paths:
        p.unlink(missing_ok=True)
    for day in {p.parent for p in paths}:
        if day.is_dir() and not any(day.iterdir()):
            day.rmdir()
    if paths and (directory / ".git").exists():
        _git(
            directory, "rm", "-q", "--cached", "--ignore-unmatch", "--", *[str(p.relative_to(directory)) for p in paths]
        )
        if _git(directory, "diff", "--cached", "--name-only"):
            _git(directory, "commit", "-q", "-m", f"pai maintain: {len(paths)} expired staging file(s)")
