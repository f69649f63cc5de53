"""The archive file `pai export` writes and `pai import` reads: one gzip'd tar whose first member is `manifest.json`,
then one member per table (`tables/NAME.tsv`, PostgreSQL's COPY text format: every type exact, vectors included),
then the registry's files (`files/...`). The manifest names every other member with its size and sha256.

Reading is the hostile side. `unpack` takes nothing the manifest does not name, no member larger than the manifest
says, no link, device or path outside the folder it unpacks into, and checks every sha256 before the caller writes
anything; every refusal is an `ArchiveError` of one line.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

FORMAT = "pai-archive"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MANIFEST_MAX_BYTES = 16 << 20  # a manifest names tables and files; far below this
CHUNK = 1 << 20


class ArchiveError(RuntimeError):
    """Why an archive cannot be written or read, in one line; nothing was written to a store."""


@dataclass(frozen=True)
class Member:
    name: str  # its path in the archive
    size: int
    sha256: str


def table_member(table: str) -> str:
    return f"tables/{table}.tsv"


def write(dest: Path, manifest: dict, members: list[tuple[Member, Path]]) -> None:
    """The archive at `dest` (written beside it, then moved in place): the manifest first, then `members`."""
    tmp = dest.with_name(dest.name + ".partial")
    try:
        with tarfile.open(tmp, "w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
            data = json.dumps(manifest, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
            for m, path in members:
                info = tarfile.TarInfo(m.name)
                info.size, info.mtime = m.size, int(time.time())
                with path.open("rb") as f:
                    tar.addfile(info, f)
        tmp.replace(dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_manifest(src: Path) -> dict:
    """The archive's manifest, checked for format and version, without reading further."""
    with _open(src) as tar:
        return _manifest(src, tar)


def unpack(src: Path, into: Path) -> dict:
    """Every member of the archive at `src` into `into`, each checked against the manifest; returns the manifest.
    Raises ArchiveError (one line) for a foreign, truncated or corrupt archive, or one that does not match its
    manifest."""
    with _open(src) as tar:
        manifest = _manifest(src, tar)
        expected = {m.name: m for m in members_of(manifest)}
        need = sum(m.size for m in expected.values())
        free = shutil.disk_usage(into).free
        if need > free:
            raise ArchiveError(f"{src}: unpacking needs {need:,} bytes, {into} has {free:,} free")
        seen = set()
        try:
            while (info := tar.next()) is not None:  # iterating would start again at the manifest
                want = expected.get(info.name)
                if want is None or info.name in seen:
                    raise ArchiveError(f"{src}: member {info.name!r} is not in its manifest")
                if not info.isreg():
                    raise ArchiveError(f"{src}: member {info.name!r} is not a plain file")
                if info.size != want.size:
                    raise ArchiveError(
                        f"{src}: member {info.name!r} holds {info.size:,} bytes, its manifest says {want.size:,}"
                    )
                seen.add(info.name)
                _copy_checked(src, tar, info, want, into / want.name)
            while tar.fileobj.read(CHUNK):  # to the gzip trailer: its CRC and length checked, a cut end found
                pass
        except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
            raise ArchiveError(f"{src}: truncated or corrupt archive ({_first(e)})") from None
        missing = sorted(set(expected) - seen)
        if missing:
            raise ArchiveError(
                f"{src}: truncated archive: {len(missing)} member(s) of its manifest missing, first {missing[0]}"
            )
    return manifest


def members_of(manifest: dict) -> list[Member]:
    """The members a manifest names (tables, then files), their names checked: relative, inside the archive."""
    try:
        items = [
            Member(table_member(t), int(spec["bytes"]), str(spec["sha256"])) for t, spec in manifest["tables"].items()
        ]
        items += [Member(str(f["name"]), int(f["bytes"]), str(f["sha256"])) for f in manifest["files"]]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ArchiveError(f"the manifest is malformed ({type(e).__name__}: {e})") from None
    for m in items:
        safe_name(m.name)
        if m.size < 0:
            raise ArchiveError(f"the manifest gives {m.name!r} a negative size")
    return items


def safe_name(name: str) -> PurePosixPath:
    """A member name that stays inside the folder it is unpacked into (no absolute path, no `..`, no NUL)."""
    p = PurePosixPath(name)
    bad = (
        "\x00" in name
        or "\\" in name
        or p.is_absolute()
        or ".." in p.parts
        or not p.parts
        or p.parts[0] not in ("tables", "files")
    )
    if bad or len(p.parts) < 2:
        raise ArchiveError(f"unsafe member name {name!r} in the archive (outside tables/ and files/)")
    return p


@contextmanager
def _open(src: Path):
    """The archive as a tar stream (members read once, in order) over gzip's own reader: tarfile's skips the
    trailer's CRC and length check."""
    try:
        gz = gzip.open(src, "rb")
        gz.peek(1)
    except FileNotFoundError:
        raise ArchiveError(f"{src}: no such file") from None
    except IsADirectoryError:
        raise ArchiveError(f"{src}: a directory, not an archive") from None
    except (OSError, EOFError, zlib.error) as e:
        raise ArchiveError(f"{src}: not a pai archive (not gzip'd: {_first(e)})") from None
    with gz:
        try:
            tar = tarfile.open(fileobj=gz, mode="r|")
        except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
            raise ArchiveError(f"{src}: not a pai archive (not a gzip'd tar: {_first(e)})") from None
        with tar:
            yield tar


def _manifest(src: Path, tar: tarfile.TarFile) -> dict:
    try:
        info = tar.next()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise ArchiveError(f"{src}: not a pai archive (not a gzip'd tar: {_first(e)})") from None
    if info is None or info.name != MANIFEST or not info.isreg():
        raise ArchiveError(f"{src}: not a pai archive (its first member is not {MANIFEST})")
    if info.size > MANIFEST_MAX_BYTES:
        raise ArchiveError(f"{src}: its manifest holds {info.size:,} bytes, more than {MANIFEST_MAX_BYTES:,}")
    try:
        manifest = json.loads(tar.extractfile(info).read())
    except (ValueError, tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise ArchiveError(f"{src}: its manifest is not readable JSON ({_first(e)})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"{src}: not a pai archive (its manifest's format is not {FORMAT!r})")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        made = manifest.get("pai_version", "an unknown pai-brain")
        raise ArchiveError(
            f"{src}: archive format version {version!r} (made by pai-brain {made}); this pai-brain reads version "
            f"{FORMAT_VERSION} only: import it with the pai-brain that made it"
        )
    return manifest


def _copy_checked(src: Path, tar: tarfile.TarFile, info: tarfile.TarInfo, want: Member, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    h, n = hashlib.sha256(), 0
    with tar.extractfile(info) as f, dest.open("wb") as out:
        while block := f.read(CHUNK):
            n += len(block)
            if n > want.size:
                raise ArchiveError(f"{src}: member {want.name!r} is longer than its manifest says")
            h.update(block)
            out.write(block)
    if n != want.size:
        raise ArchiveError(f"{src}: truncated archive: member {want.name!r} ends at {n:,} of {want.size:,} bytes")
    if h.hexdigest() != want.sha256:
        raise ArchiveError(f"{src}: member {want.name!r} does not match its manifest's sha256 (corrupt archive)")


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
