"""The selector registry in `pai export` / `pai import`: its versions (tags, description, aliases, the champion
history) as one JSON file, and the model files they keep under `$PAI_HOME/selectors/`; on import, the files are put
under the target's home and the versions registered again with the same numbers, their paths moved to that home.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from retrieval.db import pai_home
from retrieval.files import write_atomic

from .registry import MODEL, RegistryError, client

REGISTRY_FILE = "registry.json"
SELECTORS = "selectors"


def has_registry() -> bool:
    """Whether there is a registry to read: a tracking server named, or the local store made by an earlier run."""
    return bool(os.environ.get("MLFLOW_TRACKING_URI")) or (pai_home() / "mlflow.db").exists()


def snapshot(workdir: Path) -> list[tuple[str, Path]]:
    """The registry as (name under files/, path) pairs for the archive: `registry.json` (written into `workdir`) and
    every file under `$PAI_HOME/selectors/`. None when there is no registry."""
    home = pai_home().resolve()
    out = []
    if has_registry():
        c = client()
        model = c.get_registered_model(MODEL)
        versions = sorted(c.search_model_versions(f"name='{MODEL}'"), key=lambda v: int(v.version))
        registry = {
            "home": str(home),
            "tags": dict(model.tags),
            "aliases": {a: str(v) for a, v in (model.aliases or {}).items()},
            "versions": [
                {
                    "version": int(v.version),
                    "source": v.source,
                    "run_id": v.run_id,
                    "description": v.description,
                    "tags": dict(v.tags),
                }
                for v in versions
            ],
        }
        path = workdir / REGISTRY_FILE
        write_atomic(path, json.dumps(registry, indent=1))
        out.append((REGISTRY_FILE, path))
    selectors = home / SELECTORS
    if selectors.is_dir():
        out += [
            (f"{SELECTORS}/{p.relative_to(selectors).as_posix()}", p)
            for p in sorted(selectors.rglob("*"))
            if p.is_file() and not p.name.endswith(".tmp")
        ]
    return out


def source_home(files: Path) -> str | None:
    """The home the archive's registry was exported from (its paths start with it), from the unpacked `files/`."""
    path = files / REGISTRY_FILE
    return json.loads(path.read_text())["home"] if path.exists() else None


def check_empty() -> None:
    """Refuse (one line) to import into a registry that holds versions already: their numbers would clash."""
    if not has_registry():
        return
    c = client()
    if c.search_model_versions(f"name='{MODEL}'"):
        raise RegistryError(f"the target's registry ({MODEL}) holds versions already: import into an empty home")


def restore(files: Path) -> int:
    """The unpacked `files/` into this home: the model files under `$PAI_HOME/selectors/`, the versions registered
    with their numbers (a number the source had deleted is made and deleted again) and their paths moved to this
    home, the aliases and the champion history. Returns the versions registered."""
    home = pai_home().resolve()
    if (files / SELECTORS).is_dir():
        for p in sorted((files / SELECTORS).rglob("*")):
            dest = home / p.relative_to(files)
            if p.is_file() and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, dest)
    if not (files / REGISTRY_FILE).exists():
        return 0
    registry = json.loads((files / REGISTRY_FILE).read_text())
    old, new = registry["home"], str(home)

    def moved(text: str | None) -> str | None:
        return None if text is None else text.replace(old, new)

    c = client()
    for spec in registry["versions"]:
        while True:
            tags = {k: moved(v) for k, v in spec["tags"].items()}
            mv = c.create_model_version(MODEL, source=moved(spec["source"]), tags=tags, description=spec["description"])
            if int(mv.version) >= spec["version"]:
                break
            c.delete_model_version(MODEL, mv.version)  # a gap the source had: the same numbers on both sides
        if int(mv.version) != spec["version"]:
            raise RegistryError(
                f"registry version {spec['version']} became {mv.version}: the target registry was not empty"
            )
    for alias, version in registry["aliases"].items():
        c.set_registered_model_alias(MODEL, alias, version)
    for key, value in registry["tags"].items():
        c.set_registered_model_tag(MODEL, key, moved(value))
    return len(registry["versions"])
