"""A paraphrase benchmark built from material on this machine: the manual pages (`pai lab bench build-man`).

A system's manual pages say what each command does twice: once in a line of plain words (the NAME
section's "tar - an archiving utility", what `whatis` prints) and once at length in the DESCRIPTION, in the
tool's own jargon. The line is the query and the DESCRIPTION (its first 1,200 characters) the one relevant
passage; the other 19 candidates are mined by our hybrid first stage over every pooled page
(`code_bench.mine`). Short plain-word questions over long technical notes, few shared words: the case where
BM25 is weak and a fixed keyword weight follows it down. Contract-5 JSONL, generated, never committed.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from retrieval.embed import Embedder

from .code_bench import mine

MIN_WORDS, MIN_CHARS, MAX_CHARS = 4, 200, 1200
# a cloud SDK's ~13,000 generated pages (their DESCRIPTION restates the NAME line word for word) would be
# most of the pool on a machine that has it: one vendor's template, not a domain
SKIP = ("gcloud",)
SECTIONS = ("man1", "man5", "man7", "man8")  # commands, file formats, overviews, administration
_FONT = re.compile(r"\\f(\[[^\]]*\]|\(..|.)")  # \fB, \fI, \fR, \f(CW, \f[B]
_ESCAPES = {r"\-": "-", r"\(em": "-", r"\(en": "-", r"\(aq": "'", r"\(dq": '"', r"\e": "\\", r"\ ": " ", r"\&": ""}


def plain(line: str) -> str:
    """One roff line as text: font changes dropped, common escapes resolved, a macro line's arguments kept."""
    if line.startswith(('.\\"', "'\\\"")):  # a comment
        return ""
    if line.startswith((".", "'")):
        name, _, rest = line[1:].partition(" ")
        if name not in ("B", "I", "BR", "BI", "IR", "RB", "IB", "RI", "SM"):  # not .IP/.TP (bullets, indents)
            return ""
        line = rest.replace('"', "")
    line = _FONT.sub("", line)
    for k, v in _ESCAPES.items():
        line = line.replace(k, v)
    return re.sub(r"\\(\(..|\[[^\]]*\]|.)", "", line).strip()  # other escapes: \(bu, \[...], \c


def page(path: Path) -> tuple[str, str, str] | None:
    """(name, whatis line, description) of one man page (roff, gzipped or not), or None when it has not both."""
    try:
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8", errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith((".SH", ".Sh")):
            current = line[3:].strip().strip('"').upper()
            sections.setdefault(current, [])
        elif current is not None:
            words = plain(line)
            if words:
                sections[current].append(words)
    name_line = " ".join(sections.get("NAME", []))
    desc = " ".join(sections.get("DESCRIPTION", []))
    if " - " not in name_line or len(desc) < MIN_CHARS:
        return None
    name, whatis = (s.strip() for s in name_line.rsplit(" - ", 1))  # "zstd - zstd, unzstd - Compress ..."
    if len(whatis.split()) < MIN_WORDS:
        return None
    return name, whatis, desc[:MAX_CHARS]


def build(man_root: Path, embedder: Embedder, queries: int, n: int = 20, seed: int = 0, progress=None) -> list[dict]:
    """Items from the pages of sections 1, 5, 7 and 8 under `man_root` (e.g. /usr/share/man): one per page, a
    whatis line asked once."""
    pool, seen = [], set()
    pages = [p for d in SECTIONS if (man_root / d).is_dir() for p in (man_root / d).iterdir()]
    for path in sorted(p for p in pages if p.is_file() and not p.is_symlink()):
        if path.name.startswith(SKIP):
            continue
        got = page(path)
        if got is None or got[1].lower() in seen or got[2] in seen:  # one page per text (aliases, copies)
            continue
        seen.update((got[1].lower(), got[2]))
        pool.append((f"{path.parent.name}/{path.name}", got[1], got[2]))
    if len(pool) < n:
        raise ValueError(f"only {len(pool)} usable manual pages under {man_root}: not a benchmark")
    return mine(pool, embedder, queries, n, seed, progress)
