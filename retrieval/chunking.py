"""Structure-aware chunking: markdown by heading hierarchy, code by top-level blocks, prose by paragraph.

Every chunk keeps where it came from (1-based inclusive line range) and its heading path. Fenced
code blocks are never split and stay with the section they belong to.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdx", ".rst"}
CODE_SUFFIXES = {
    ".py",
    ".js",
    ".jsx",
    ".ts",
    ".tsx",
    ".go",
    ".rs",
    ".java",
    ".kt",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".cs",
    ".rb",
    ".php",
    ".swift",
    ".scala",
    ".sh",
    ".bash",
    ".sql",
    ".lua",
    ".r",
    ".toml",
    ".yaml",
    ".yml",
    ".ini",
    ".cfg",
}
TEXT_SUFFIXES = {".txt", ".text", ".log", ""}

ATOMIC_LIMIT = 8  # a fenced code block is kept whole up to this many times chunk_tokens
LINE_LIMIT = 2  # a single line longer than this many times chunk_tokens is cut into pieces
MAX_HEADING_CHARS = 500  # a heading (or title) longer than this is cut: it is repeated on every chunk

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def approx_tokens(text: str) -> int:
    """Cheap, model-free token estimate (~4 characters per token for English and code)."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    heading: str | None = None
    parent_heading: str | None = None
    level: int = 0

    @property
    def content_hash(self) -> str:
        key = f"{self.parent_heading or ''}\x1f{self.heading or ''}\x1f{self.text}"
        return hashlib.sha256(key.encode("utf-8")).hexdigest()

    @property
    def tokens(self) -> int:
        return approx_tokens(self.text)


@dataclass(frozen=True)
class _Block:
    lines: list[str]
    start: int  # 1-based line number of lines[0]
    atomic: bool = False  # a fenced code block: never split

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1


def chunk_document(text: str, kind: str, max_tokens: int, title: str | None = None) -> list[Chunk]:
    """Chunk `text` by its kind ("markdown", "code" or "text"); `title` heads chunks with no heading."""
    if kind == "markdown":
        return chunk_markdown(text, max_tokens, title)
    if kind == "code":
        return chunk_code(text, max_tokens, title)
    return chunk_text(text, max_tokens, title)


def kind_for_suffix(suffix: str) -> str:
    suffix = suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in CODE_SUFFIXES:
        return "code"
    return "text"


def chunk_markdown(text: str, max_tokens: int, title: str | None = None) -> list[Chunk]:
    lines = text.split("\n")
    stack: list[tuple[int, str]] = []  # (level, heading) of the open sections
    sections: list[tuple[list[tuple[int, str]], int, int]] = []  # (heading stack, start, end) 0-based
    start, fence = 0, None
    for i, line in enumerate(lines):
        if fence:
            if re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", line):
                fence = None
            continue
        if m := _FENCE.match(line):
            fence = m.group(1)
            continue
        if m := _ATX.match(line):
            if i > start:
                sections.append((list(stack), start, i - 1))
            level = len(m.group(1))
            stack = [h for h in stack if h[0] < level] + [(level, m.group(2))]
            start = i
    sections.append((list(stack), start, len(lines) - 1))

    chunks = []
    for heads, s, e in sections:
        body = lines[s : e + 1]
        has_heading = bool(heads) and _ATX.match(body[0]) is not None
        if not any(ln.strip() for ln in body[1 if has_heading else 0 :]):
            continue  # a heading with no body of its own: it lives on as a parent heading
        level, heading = heads[-1] if heads else (0, title)
        parent = heads[-2][1] if len(heads) > 1 else (title if heads else None)
        for block in _pack(_markdown_blocks(body, s + 1), max_tokens):
            chunks.append(_make_chunk(block, heading, parent, level))
    return [c for c in chunks if c is not None]


def chunk_code(text: str, max_tokens: int, title: str | None = None) -> list[Chunk]:
    """Split at top-level statements that follow a blank line (def/class/func boundaries)."""
    lines = text.split("\n")
    blocks, start = [], 0
    for i in range(1, len(lines)):
        top_level = lines[i][:1] not in ("", " ", "\t", ")", "]", "}")
        if top_level and not lines[i - 1].strip():
            blocks.append(_Block(lines[start:i], start + 1))
            start = i
    blocks.append(_Block(lines[start:], start + 1))
    out = []
    for block in _pack(blocks, max_tokens):
        first = next((ln.strip() for ln in block.lines if ln.strip()), "")
        out.append(_make_chunk(block, first[:80] or None, title, 0))
    return [c for c in out if c is not None]


def chunk_text(text: str, max_tokens: int, title: str | None = None) -> list[Chunk]:
    lines = text.split("\n")
    blocks, start = [], 0
    for i, line in enumerate(lines):
        if not line.strip():
            if i > start:
                blocks.append(_Block(lines[start:i], start + 1))
            start = i + 1
    if start < len(lines):
        blocks.append(_Block(lines[start:], start + 1))
    out = [_make_chunk(b, title, None, 0) for b in _pack(blocks, max_tokens)]
    return [c for c in out if c is not None]


def _markdown_blocks(body: list[str], first_line: int) -> list[_Block]:
    """Paragraph blocks of a section; a fenced code block is one atomic block."""
    blocks, cur, cur_start, fence = [], [], first_line, None

    def flush(next_start: int, atomic: bool = False) -> None:
        nonlocal cur, cur_start
        if cur:
            blocks.append(_Block(cur, cur_start, atomic))
        cur, cur_start = [], next_start

    for j, line in enumerate(body):
        n = first_line + j
        if fence:
            cur.append(line)
            if re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", line):
                fence = None
                flush(n + 1, atomic=True)
            continue
        if m := _FENCE.match(line):
            flush(n)
            fence = m.group(1)
            cur.append(line)
        elif not line.strip():
            flush(n + 1)
        else:
            cur.append(line)
    flush(first_line + len(body), atomic=fence is not None)
    return blocks


def _pack(blocks: list[_Block], max_tokens: int) -> list[_Block]:
    """Greedily merge consecutive blocks up to max_tokens; split an oversized non-atomic block by
    lines (a fenced block only past ATOMIC_LIMIT times the size), and an over-long line into pieces."""
    pieces: list[_Block] = []
    for b in blocks:
        size = approx_tokens("\n".join(b.lines))
        if size > max_tokens and len(b.lines) > 1 and (not b.atomic or size > ATOMIC_LIMIT * max_tokens):
            pieces.extend(_split_lines(b, max_tokens))
        else:
            pieces.append(b)
    out: list[_Block] = []
    for p in pieces:
        if len(p.lines) == 1 and approx_tokens(p.lines[0]) > LINE_LIMIT * max_tokens:
            out.extend(_split_line(p, max_tokens))  # one line of megabytes (minified, a log, a pasted blob)
            continue
        if out:
            prev = out[-1]
            gap = p.start - prev.end - 1  # blank lines between them are kept, so line numbers hold
            merged = prev.lines + [""] * gap + p.lines
            if approx_tokens("\n".join(merged)) <= max_tokens:
                out[-1] = _Block(merged, prev.start)
                continue
        out.append(p)
    return out


def _split_lines(block: _Block, max_tokens: int) -> list[_Block]:
    out, cur, start = [], [], block.start
    for j, line in enumerate(block.lines):
        if cur and approx_tokens("\n".join(cur + [line])) > max_tokens:
            out.append(_Block(cur, start))
            cur, start = [], block.start + j
        cur.append(line)
    out.append(_Block(cur, start))
    return out


def _split_line(block: _Block, max_tokens: int) -> list[_Block]:
    """Pieces of one over-long line, cut at whitespace where there is some; each keeps the line number."""
    line, width, out = block.lines[0], max_tokens * 4, []
    while line:
        cut = len(line) if len(line) <= width else line.rfind(" ", width // 2, width) + 1 or width
        out.append(_Block([line[:cut]], block.start, atomic=True))
        line = line[cut:]
    return out


def _make_chunk(block: _Block, heading: str | None, parent: str | None, level: int) -> Chunk | None:
    lines = block.lines
    lo = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if lo is None:
        return None
    hi = max(i for i, ln in enumerate(lines) if ln.strip())
    text = "\n".join(lines[lo : hi + 1])
    heading, parent = (h[:MAX_HEADING_CHARS] if h else h for h in (heading, parent))
    return Chunk(text, block.start + lo, block.start + hi, heading, parent, level)
