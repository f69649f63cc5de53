"""Reading files into documents: what a path holds, and the one-line errors for what it can't.

A plain file is one document; a JSONL corpus is streamed, one document per record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..chunking import CODE_SUFFIXES, MARKDOWN_SUFFIXES, TEXT_SUFFIXES, kind_for_suffix
from ..dialogue import is_chat_log

SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".pai", ".dvc"}
CORPUS_SUFFIXES = {".jsonl"}
WALKED_SUFFIXES = MARKDOWN_SUFFIXES | CODE_SUFFIXES | (TEXT_SUFFIXES - {""}) | CORPUS_SUFFIXES


class InputError(ValueError):
    """A file that cannot be ingested; the message is the one line the user sees."""


@dataclass(frozen=True)
class Document:
    source: str  # unique key: the file path, or "path#id" for a corpus record
    path: str  # absolute path of the file it came from
    text: str
    kind: str  # markdown | code | text | conversation (a chat log: retrieval/dialogue.py)
    title: str | None = None
    written: datetime | None = None  # when it was written: its file's modification time; None: when it is stored


MAX_ID_CHARS = 300  # a corpus record's id becomes part of a unique (b-tree indexed) key


def text_problem(text: str) -> str | None:
    """Why Postgres cannot store `text` (NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"is not valid Unicode (lone surrogate at offset {e.start})"
    return None


def resolved(path: Path) -> str:
    """The absolute path, symlinks resolved where they can be (a symlink loop stays as named)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # RuntimeError: symlink loop (Python < 3.13)
        return os.path.abspath(path)


def read_documents(path: Path, max_bytes: int) -> Iterator[Document | InputError]:
    """The documents in one file. A JSONL corpus is streamed: one document per record, the size cap
    applies per record, and bad records come back as errors while the rest go on."""
    written = datetime.fromtimestamp(_check_file(path).st_mtime, UTC)
    abspath = resolved(path)
    if path.suffix.lower() not in CORPUS_SUFFIXES:
        text = _read_text(path, max_bytes)
        kind = kind_for_suffix(path.suffix)
        kind = "conversation" if kind == "markdown" and is_chat_log(text) else kind
        yield Document(abspath, abspath, text, kind, written=written)
        return
    seen: set[str] = set()
    n_records = 0
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            n_records += 1
            if len(raw) > max_bytes:
                yield InputError(f"{path}:{n}: record of {len(raw):,} bytes is over the {max_bytes:,}-byte cap")
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                yield InputError(f"{path}:{n}: not UTF-8 text")
                continue
            except json.JSONDecodeError as e:
                yield InputError(f"{path}:{n}: invalid JSON ({e.msg})")
                continue
            # benchmark records (contract 5) carry their paragraphs as candidates: pool them as the corpus
            records = record.get("candidates") if isinstance(record, dict) else None
            for r in records if isinstance(records, list) else [record]:
                doc = _record_document(r, abspath, written)
                if isinstance(doc, str):
                    yield InputError(f"{path}:{n}: {doc}")
                elif doc.source not in seen:
                    seen.add(doc.source)
                    yield doc
    if n_records == 0:
        yield InputError(f"{path}: empty file (no records)")


def _record_document(record: object, abspath: str, written: datetime) -> Document | str:
    if not isinstance(record, dict):
        return "record is not a JSON object"
    rid = record.get("_id", record.get("id", record.get("doc_id")))
    text = record.get("text")
    if rid is None or not isinstance(text, str) or isinstance(rid, (dict, list)):
        return "record needs an id (_id or id) and a text string"
    rid = str(rid)
    if len(rid) > MAX_ID_CHARS:
        return f"record id of {len(rid):,} characters is over {MAX_ID_CHARS}"
    title = record.get("title") if isinstance(record.get("title"), str) else None
    for name, value in (("id", rid), ("text", text), ("title", title or "")):
        if why := text_problem(value):
            return f"record {rid[:80]!r}: {name} {why}" if name != "id" else f"record id {why}"
    if not text.strip():
        return f"record {rid}: empty text"
    return Document(f"{abspath}#{rid}", abspath, text, "text", title or None, written)


def _check_file(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or directory") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None


def _read_text(path: Path, max_bytes: int) -> str:
    size = _check_file(path).st_size
    if size > max_bytes:
        raise InputError(f"{path}: {size:,} bytes is over the {max_bytes:,}-byte cap (ingest.max_file_bytes)")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if b"\x00" in raw[:8192]:
        raise InputError(f"{path}: binary file")
    if (nul := raw.find(b"\x00")) >= 0:
        raise InputError(f"{path}: NUL byte at offset {nul:,} (binary data in a text file?)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (bad byte at offset {e.start})") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text


def discover(paths: list[Path]) -> tuple[list[Path], list[Path], int]:
    """Files to ingest, the arguments that no longer exist, and files skipped by type."""
    files, missing, skipped = [], [], 0
    for p in paths:
        if p.is_dir():
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(names):
                    f = Path(root) / name
                    if name.startswith(".") or f.suffix.lower() not in WALKED_SUFFIXES:
                        skipped += 1
                    else:
                        files.append(f)
        elif p.exists():
            files.append(p)
        else:
            missing.append(p)
    return files, missing, skipped
