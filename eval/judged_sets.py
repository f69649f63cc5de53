"""The judged benchmark sets that ship with the repository: `data/judged/` (SciFact, HotpotQA, LoCoMo; their
sources and licences in its README). Each file is committed xz-compressed beside the path it unpacks to, and
`SHA256SUMS` names every unpacked file's checksum. `.ci/install` unpacks them (`python -m eval.judged_sets`);
every `pai` command unpacks what is missing first."""

from __future__ import annotations

import lzma
import os
import shutil
import sys
from pathlib import Path

from retrieval.files import files_sha256

JUDGED = Path(__file__).resolve().parents[1] / "data" / "judged"  # the repository's copy, wherever `pai` runs from
MANIFEST = "SHA256SUMS"  # sha256sum's format: `cd data/judged && sha256sum -c SHA256SUMS` checks it too


def unpack(folder: Path = JUDGED) -> list[Path]:
    """Unpack each `X.xz` under `folder` whose `X` is missing; the files written. Each is written to a name of
    this process's own, then renamed: a reader, or a second process unpacking at once, never sees half a file."""
    written = []
    for packed in sorted(folder.rglob("*.xz")):
        out = packed.with_suffix("")
        if out.exists():
            continue
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        with lzma.open(packed) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, out)
        written.append(out)
    return written


def mismatches(folder: Path = JUDGED) -> list[str]:
    """The manifest's files missing under `folder` or differing from their checksum; empty: all there, byte for byte."""
    bad = []
    for line in (folder / MANIFEST).read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        if not (folder / name).is_file() or files_sha256(folder / name) != digest:
            bad.append(name)
    return bad


def main() -> None:
    written = unpack()
    bad = mismatches()
    if bad:
        sys.exit(f"error: {JUDGED}: differ from {MANIFEST} (delete them and run again): {', '.join(bad)}")
    print(f"judged benchmark sets: {len(written)} files unpacked, all match {MANIFEST} ({JUDGED})")


if __name__ == "__main__":
    main()
