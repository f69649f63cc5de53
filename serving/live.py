"""Live ingestion beside the webhook: an inbox folder (`pai watch`) and a git post-commit hook
(`pai hooks install`)."""

from __future__ import annotations

import queue
import shlex
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from retrieval.corpus.ingest import ingest_paths
from retrieval.corpus.report import IngestReport
from retrieval.embed import Embedder
from retrieval.params import IngestParams, SearchParams


def _unique(dest: Path) -> Path:
    if not dest.exists():
        return dest
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return dest.with_name(f"{dest.stem}.{stamp}{dest.suffix}")


def process_inbox_file(
    conn: psycopg.Connection, path: Path, inbox: Path, ip: IngestParams, sp: SearchParams, embedder: Embedder
) -> tuple[Path, IngestReport | None, str | None]:
    """Move `path` to processed/ and ingest it there; on any error move it to failed/ and log a line.
    Returns (where it ended, the report, the error)."""
    processed, failed = inbox / "processed", inbox / "failed"
    processed.mkdir(exist_ok=True)
    failed.mkdir(exist_ok=True)
    dest = _unique(processed / path.name)
    shutil.move(str(path), dest)
    try:
        report = ingest_paths(conn, [dest], ip, sp, embedder)
        error = "; ".join(report.errors) or None
    except Exception as e:  # noqa: BLE001 - one bad file must not stop the watcher
        report, error = None, f"{type(e).__name__}: {e}"
    if error is None:
        return dest, report, None
    bad = _unique(failed / path.name)
    shutil.move(str(dest), bad)
    if report is not None:  # all or nothing: records already stored from this file go with it
        ingest_paths(conn, [dest], ip, sp, embedder)
    line = f"{datetime.now(UTC).isoformat(timespec='seconds')} {path.name}: {error}"
    with open(failed / "errors.log", "a", encoding="utf-8") as log:
        log.write(line.replace("\n", " ") + "\n")
    return bad, report, error


def watch(
    inbox: Path,
    handle: Callable[[Path], None],
    stop: threading.Event,
    settle_s: float = 0.2,
) -> None:
    """Call `handle` for every file already in `inbox` and each one that arrives, until `stop`."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    arrivals: queue.Queue[Path] = queue.Queue()

    class Arrivals(FileSystemEventHandler):
        def on_created(self, event):
            if not event.is_directory:
                arrivals.put(Path(event.src_path))

        def on_moved(self, event):
            if not event.is_directory:
                arrivals.put(Path(event.dest_path))

    for p in sorted(inbox.iterdir()):
        if p.is_file() and not p.name.startswith("."):
            arrivals.put(p)
    observer = Observer()
    observer.schedule(Arrivals(), str(inbox), recursive=False)
    observer.start()
    try:
        while not stop.is_set():
            try:
                p = arrivals.get(timeout=0.1)
            except queue.Empty:
                continue
            if p.parent != inbox or p.name.startswith(".") or not _settled(p, settle_s):
                continue
            handle(p)
    finally:
        observer.stop()
        observer.join()


def _settled(p: Path, settle_s: float) -> bool:
    """Wait until the writer is done (size stops changing); False if the file went away."""
    try:
        size = -1
        while size != (size := p.stat().st_size):
            time.sleep(settle_s)
        return True
    except FileNotFoundError:
        return False


HOOK = """#!/bin/sh
# pai-brain: re-ingest the files this commit touched (deleted ones are removed). Runs in the
# background so the commit is not held up; output goes to .git/pai-ingest.log.
cd "$(git rev-parse --show-toplevel)" || exit 0
export PAI_HOME="${{PAI_HOME:-{home}}}"
list=$(mktemp) || exit 0
git diff-tree --root --no-commit-id --name-only -r -z HEAD > "$list"
# a background job's stdin is /dev/null unless redirected: hand xargs the list explicitly
(xargs -0 -r {pai} ingest{params} < "$list" >> .git/pai-ingest.log 2>&1; rm -f "$list") &
"""


def install_hook(repo: Path, params: Path | None, pai_home: Path) -> Path:
    """Write the post-commit hook into `repo` (refusing to clobber a hook that is not ours). `params` None: the
    hook's `pai ingest` reads the params of retrieval.params.params_files, as a command run by hand would."""
    git_dir = repo / ".git"
    if not git_dir.is_dir():
        raise ValueError(f"{repo}: not a git repository (no .git folder)")
    hook = git_dir / "hooks" / "post-commit"
    if hook.exists() and "pai-brain" not in hook.read_text(errors="replace"):
        raise ValueError(f"{hook}: a post-commit hook exists already; add `pai ingest` to it by hand")
    pai = shutil.which("pai") or str(Path(sys.executable).with_name("pai"))
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(
        HOOK.format(
            home=shlex.quote(str(pai_home.resolve())),
            pai=shlex.quote(pai),
            params=f" --params {shlex.quote(str(params.resolve()))}" if params else "",
        )
    )
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return hook
