"""Files the pipeline writes and trusts: atomic replacement, and content hashes of files and folders."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` beside `path`, then rename it into place: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _update(h, path: Path) -> None:
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)


def files_sha256(*paths: Path) -> str:
    """One sha256 over the contents of `paths`, in the order given."""
    h = hashlib.sha256()
    for p in paths:
        _update(h, p)
    return h.hexdigest()


def dir_sha256(folder: Path) -> str:
    """One sha256 over a folder's files (relative names and contents, in sorted order)."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode())
        _update(h, f)
    return h.hexdigest()
