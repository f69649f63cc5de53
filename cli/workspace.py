"""One store, one pipeline workspace (docs/pipeline.md, "One store, one workspace").

Every file the pipeline writes in the checkout (each `outs`, `metrics` and `plots` path of dvc.yaml, the demo's
cycle.json, dvc.lock) belongs to the store it came from: the database's `store_identity`. Before a pipeline run
on store B, the outputs of the store the checkout holds (A, named by the marker `.pai-workspaces/checkout.json`,
else by the pull's watermark) are parked under `.pai-workspaces/<A's id>/`, B's parked outputs are moved back
(a store with none starts from the repository's committed files), and the marker names B. So each store's log,
watermark, training data, models and metrics survive the other's retrain, and no run reads another's. dvc.yaml
is unchanged: the checkout always holds exactly one store's outputs, and `pai status` names which.

A lock (`.pai-workspaces/lock`) holds the checkout for one run at a time: a second is refused in one line.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import yaml

from retrieval.db import pai_home, store_id
from retrieval.files import write_atomic
from retrieval.logs.feedback_records import FEEDBACK_FILE, WATERMARK_FILE, WORKSPACES

CHECKOUT = Path(__file__).resolve().parents[1]  # the folder holding dvc.yaml: where `pai retrain` runs the pipeline
FOLDER = WORKSPACES  # in the checkout, git- and dvc-ignored
MARKER = "checkout.json"  # whose outputs the checkout holds: {"store", "database", "home", "since"}
OWNER = "store.json"  # in a parked folder: whose outputs it holds
LOCK = "lock"
EXTRA = ("dvc.lock", "${evaluate.out}/cycle.json")  # written by a run, outside dvc.yaml's outs
_VAR = re.compile(r"\$\{([^}]+)\}")


class WorkspaceError(RuntimeError):
    """A one-line reason the checkout was not switched (nothing was moved)."""


def store_ok(store: object) -> bool:
    """Whether `store` is a store id as the database writes it (a canonical UUID): the only name a parked folder
    may have, so a look-alike (case, spaces, a path) never names one."""
    try:
        return isinstance(store, str) and str(uuid.UUID(store)) == store
    except ValueError:
        return False


def outputs(root: Path) -> list[str]:
    """Every path the pipeline writes, relative to the checkout: dvc.yaml's stage outs, metrics and plots and its
    top-level plots, with params.yaml's `${section.key}` filled in, then EXTRA."""
    dvc, params = _yaml(root / "dvc.yaml"), _yaml(root / "params.yaml")

    def fill(path: str) -> str:
        def value(m: re.Match) -> str:
            v = params
            try:
                for key in m[1].split("."):
                    v = v[key]
            except (KeyError, TypeError):
                raise WorkspaceError(f"workspace: dvc.yaml's {m[0]} is not in params.yaml") from None
            return str(v)

        return _VAR.sub(value, path)

    entries = [e for stage in dvc["stages"].values() for k in ("outs", "metrics", "plots") for e in stage.get(k, [])]
    entries += dvc.get("plots", [])
    names = [fill(e if isinstance(e, str) else next(iter(e))) for e in entries] + [fill(e) for e in EXTRA]
    out = []
    for name in dict.fromkeys(Path(n).as_posix().rstrip("/") for n in names):
        if Path(name).is_absolute() or ".." in Path(name).parts or name.split("/")[0] == FOLDER:
            raise WorkspaceError(f"workspace: {name!r} is not a path inside the checkout (dvc.yaml, params.yaml)")
        out.append(name)
    return out


def _yaml(path: Path) -> dict:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise WorkspaceError(f"workspace: {path}: {str(e).splitlines()[0]}") from None


def identity(conn) -> dict:
    """The store a connection names, as the marker records it: its id, database and home."""
    return {"store": store_id(conn), "database": conn.info.dbname, "home": str(pai_home().resolve())}


def _read(path: Path) -> dict | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return d if isinstance(d, dict) else None
    except (OSError, ValueError):
        return None


def holder(root: Path) -> tuple[str | None, str]:
    """Whose outputs the checkout holds: (store id, how we know). The marker says; without a readable one, the
    pull's watermark (in params.yaml's pull.out); None when neither names a store (a corrupt marker,
    a watermark from before stores had ids): the outputs are nobody's, parked aside, never read."""
    marker = _read(root / FOLDER / MARKER)
    if marker is not None and store_ok(marker.get("store")):
        return marker["store"], "marker"
    why = "marker unreadable" if (root / FOLDER / MARKER).exists() else "no marker"
    feedback = root / str(_yaml(root / "params.yaml")["pull"]["out"])
    w = feedback / WATERMARK_FILE
    mark = _read(w)
    if mark is not None and store_ok(mark.get("store")):
        return mark["store"], f"{why}; watermark"
    if not w.exists() and not (feedback / FEEDBACK_FILE).exists():
        return None, f"{why}; nothing pulled"  # a fresh checkout: its files are the repository's, nobody's
    return None, f"{why}; watermark names no store"


def _move(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    os.replace(src, dest)


def park(root: Path, paths: list[str], into: Path, owner: dict) -> int:
    """Move each present path under `into` (its owner named in `into/store.json` first); how many were moved."""
    into.mkdir(parents=True, exist_ok=True)
    write_atomic(into / OWNER, json.dumps(owner) + "\n")
    moved = 0
    for p in paths:
        if (root / p).exists() or (root / p).is_symlink():
            _move(root / p, into / p)
            moved += 1
    return moved


def check_parked(root: Path, store: str) -> Path | None:
    """`store`'s parked folder, None where it has none; a link, or a folder whose owner file names another store,
    is refused in one line."""
    parked = root / FOLDER / store
    if not (parked.exists() or parked.is_symlink()):
        return None
    owner = _read(parked / OWNER)
    if parked.is_symlink() or not parked.is_dir() or owner is None or owner.get("store") != store:
        raise WorkspaceError(
            f"workspace: {parked} does not hold store {store}'s outputs (its {OWNER} says "
            f"{(owner or {}).get('store', 'nothing')!r}): move it away, then run again"
        )
    return parked


def restore(root: Path, paths: list[str], store: str) -> int:
    """Move `store`'s parked paths back where the checkout lacks them; how many. A parked folder that is a link,
    or whose owner file names another store, is refused (nothing moved)."""
    parked = check_parked(root, store)
    if parked is None:
        return 0
    moved = 0
    for p in paths:
        src = parked / p
        if (src.exists() or src.is_symlink()) and not ((root / p).exists() or (root / p).is_symlink()):
            _move(src, root / p)
            moved += 1
    return moved


def reference(root: Path, paths: list[str]) -> None:
    """The repository's committed files among `paths` that the checkout lacks, checked out from HEAD: what a store
    with no outputs of its own starts from (the same for every store). Nothing where the checkout is not git's."""
    missing = [p for p in paths if not (root / p).exists()]
    if not missing:
        return
    run = subprocess.run(["git", "ls-files", "-z", "--", *missing], cwd=root, capture_output=True, text=True)
    tracked = [p for p in run.stdout.split("\0") if p] if run.returncode == 0 else []
    if tracked:
        subprocess.run(["git", "checkout", "HEAD", "--", *tracked], cwd=root, capture_output=True)


def switch(root: Path, me: dict, log=print) -> None:
    """Make the checkout hold store `me["store"]`'s outputs (park the holder's, restore its own); the marker
    written last, so a run killed midway switches again next time, nothing lost."""
    store = me["store"]
    if not store_ok(store):
        raise WorkspaceError(f"workspace: {store!r} is not a store id")
    paths = outputs(root)
    check_parked(root, store)  # before anything moves
    held, how = holder(root)
    if held != store:
        present = any((root / p).exists() for p in paths)
        if held is None and how.endswith("nothing pulled"):
            pass  # nobody's outputs: the repository's files, kept
        elif present:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            name = held if held is not None else f"unclaimed-{stamp}"
            owner = _read(root / FOLDER / MARKER) if how == "marker" else None
            n = park(root, paths, root / FOLDER / name, owner or {"store": held, "how": how})
            log(
                f"workspace: parked {n} output(s) of {'store ' + held if held else 'no known store'} ({how}) in {FOLDER}/{name}"
            )
    n = restore(root, paths, store)
    if n:
        log(f"workspace: restored {n} output(s) of store {store} from {FOLDER}/{store}")
    reference(root, paths)
    (root / FOLDER).mkdir(exist_ok=True)
    write_atomic(root / FOLDER / MARKER, json.dumps(me | {"since": datetime.now(UTC).isoformat()}) + "\n")


@contextmanager
def held(root: Path, me: dict, log=print) -> Iterator[None]:
    """The checkout, switched to `me`'s store, for one run: a second run meanwhile is refused in one line."""
    (root / FOLDER).mkdir(exist_ok=True)
    with open(root / FOLDER / LOCK, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise WorkspaceError(
                f"workspace: another pipeline run holds {root} ({f.read().strip() or 'unknown'}): "
                "run again when it has finished"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, store {me.get('store')}\n")
        f.flush()
        switch(root, me, log)
        yield


def describe(root: Path, store: str | None = None) -> dict | None:
    """Whose outputs the checkout holds, for `pai status`: the marker's fields, how it is known, and whether they
    are `store`'s; the parked stores. None where `root` holds no pipeline."""
    if not (root / "dvc.yaml").exists():
        return None
    held_by, how = holder(root)
    marker = _read(root / FOLDER / MARKER) if how == "marker" else None
    parked = sorted(p.name for p in (root / FOLDER).glob("*") if p.is_dir()) if (root / FOLDER).is_dir() else []
    return {
        "checkout": str(root),
        "store": held_by,
        "database": (marker or {}).get("database"),
        "home": (marker or {}).get("home"),
        "known_by": how,
        "this_store": held_by is not None and held_by == store,
        "parked": parked,
    }


def status_line(ws: dict) -> str:
    """`pai status`'s line on the checkout's pipeline outputs."""
    if ws["store"] is None:
        return f"pipeline outputs in {ws['checkout']}: no store's ({ws['known_by']})"
    where = ", ".join(f"{k} {ws[k]}" for k in ("database", "home") if ws[k])
    return (
        f"pipeline outputs in {ws['checkout']}: store {ws['store']}"
        + (f" ({where})" if where else "")
        + (
            "; this store's"
            if ws["this_store"]
            else "; another store's: `pai retrain` parks them and restores this one's"
        )
        + (f"; parked: {', '.join(ws['parked'])}" if ws["parked"] else "")
    )
