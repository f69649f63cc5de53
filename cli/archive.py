"""`pai export FILE` and `pai import FILE`: the whole memory (every table of the store, the selector registry's
versions and their model files) as one versioned archive, and back into an empty home or another PostgreSQL
(retrieval/ops/archive.py; the registry's side eval/registry_archive.py)."""

from __future__ import annotations

import importlib.metadata
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from eval import registry_archive
from eval.registry import RegistryError
from retrieval.db import DatabaseError, connect, pai_home
from retrieval.ops.archive import export_store, import_store
from retrieval.ops.archive_format import ArchiveError

from .terminal import UPKEEP, _fail, console

app = typer.Typer()


def pai_version() -> str:
    try:
        return importlib.metadata.version("pai-brain")
    except importlib.metadata.PackageNotFoundError:  # a source tree never installed
        return "unknown"


@app.command("export", rich_help_panel=UPKEEP, short_help="The whole memory as one archive file.")
def export_command(
    file: Annotated[Path, typer.Argument(help="the archive to write (a gzip'd tar)")],
    force: Annotated[bool, typer.Option("--force", help="replace FILE when it exists")] = False,
) -> None:
    """Write the store (documents, chunks with their vectors, dates and scopes, the feedback log, captures, trials,
    every other table) as of one moment, and the selector registry's versions with their model files, to FILE.
    Writes may go on meanwhile: the archive holds each one wholly or not at all."""
    if file.exists() and not force:
        _fail(f"{file} exists: name another file, or --force to replace it")
    if not file.resolve().parent.is_dir():
        _fail(f"{file.parent} is not a folder")
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(dir=file.resolve().parent, prefix=".pai-registry-") as tmp:
            files = registry_archive.snapshot(Path(tmp))
            with connect() as conn, console.status(f"exporting to {file}"):
                manifest = export_store(conn, file, pai_version(), files)
    except (DatabaseError, ArchiveError, RegistryError, OSError) as e:
        _fail(_line(e))
    rows = sum(t["rows"] for t in manifest["tables"].values())
    console.print(
        f"exported {rows:,} rows of {len(manifest['tables'])} tables and {len(manifest['files'])} registry files "
        f"(store {manifest['store_id']}) to {file}: {file.stat().st_size:,} bytes in {time.perf_counter() - t0:.1f} s",
        soft_wrap=True,
    )


@app.command("import", rich_help_panel=UPKEEP, short_help="Load an archive into an empty store and home.")
def import_command(
    file: Annotated[Path, typer.Argument(help="an archive written by `pai export`")],
    into_empty: Annotated[
        bool,
        typer.Option("--into-empty/--into-any", help="refuse a store that holds rows already (--into-any: try anyway)"),
    ] = True,
) -> None:
    """Load FILE into the configured store (DATABASE_URL, else the embedded one under PAI_HOME) and the selector
    registry of this home: checked against its manifest before anything is written, loaded in one transaction (ids
    kept), the full-text rows and indexes rebuilt, the origin's store id recorded. A bad archive is one line, and
    nothing is written."""
    t0 = time.perf_counter()
    home = pai_home()
    home.mkdir(parents=True, exist_ok=True)
    try:
        if into_empty:
            registry_archive.check_empty()
        with tempfile.TemporaryDirectory(dir=home, prefix=".pai-import-") as tmp:
            with connect() as conn, console.status(f"importing {file}"):
                manifest = import_store(conn, file, Path(tmp), into_empty, moved)
            try:
                versions = registry_archive.restore(Path(tmp) / "files")
            except (RegistryError, OSError) as e:
                _fail(f"the store was imported, the selector registry was not: {_line(e)}")
    except (DatabaseError, ArchiveError, RegistryError, OSError) as e:
        _fail(_line(e))
    rows = sum(t["rows"] for t in manifest["tables"].values())
    console.print(
        f"imported {rows:,} rows of {len(manifest['tables'])} tables and {versions} registry versions from {file} "
        f"(store {manifest['store_id']}, {manifest['created_at']}) in {time.perf_counter() - t0:.1f} s",
        soft_wrap=True,
    )


def moved(files: Path) -> tuple[str, str] | None:
    """The source's home and this one: the version records' paths move from one to the other."""
    old = registry_archive.source_home(files)
    return None if old is None else (old, str(pai_home().resolve()))


def _line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
