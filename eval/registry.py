"""Selector versions in the MLflow model registry (docs/architecture.md, "Contracts" 6): registering a version with
its *version record* (the export's `selector.json`: GGUF path and sha256, prompt format, base model, dataset hash,
Ollama tag; or a ranker folder's) and its eval metrics as tags, its model kept by content under
`$PAI_HOME/selectors/`, and reading them back: a version's record, the champion, the champion history, whether a
record's files are the ones registered. The moves between versions are `eval.promotion`'s.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from retrieval.contracts.selection import FIRST_STAGE, current_name, current_record
from retrieval.db import pai_home
from retrieval.files import dir_sha256, files_sha256
from retrieval.tracking import SELECTOR_MODEL, use_mlflow
from serving.selectors import CE_RETIRED, FIRST_STAGE_RECORD, FOLDER_KINDS

MODEL = SELECTOR_MODEL


class RegistryError(RuntimeError):
    """A one-line reason a registry operation did not happen (nothing was changed)."""


def client():
    c = use_mlflow().MlflowClient()
    try:
        c.get_registered_model(MODEL)
    except Exception as e:  # noqa: BLE001 - mlflow raises RestException for "not found", others when down
        if "RESOURCE_DOES_NOT_EXIST" not in str(e) and "not found" not in str(e).lower():
            raise RegistryError(f"MLflow registry unavailable: {str(e).splitlines()[0][:200]}") from e
        c.create_registered_model(
            MODEL, description="Context selectors for pai-brain; alias champion = what the service runs."
        )
    return c


def store_gguf(gguf: Path, sha256: str) -> Path:
    """An immutable copy of the GGUF, by content (a hard link when possible): the next export
    overwrites models/export/, a registered version must keep its file for rollback."""
    dest = pai_home().resolve() / "selectors" / f"{sha256[:16]}.gguf"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(gguf, tmp)
        except OSError:
            shutil.copyfile(gguf, tmp)
        os.replace(tmp, dest)
    return dest


def store_dir(folder: Path, sha256: str) -> Path:
    """An immutable copy of a model folder (the ranker), by content."""
    dest = pai_home().resolve() / "selectors" / sha256[:16]
    if not dest.exists():
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(folder, tmp)
        os.replace(tmp, dest)
    return dest


def has_model(kind: str, model_dir: Path) -> bool:
    """Whether a stage's folder holds a trained model of `kind`: its config exists."""
    return (model_dir / FOLDER_KINDS[kind][0]).exists()


def folder_record(kind: str, model_dir: Path) -> dict:
    """The version record of a trained model folder: a ranker (train_ranker)."""
    config, prefix = FOLDER_KINDS[kind]
    cfg = json.loads((model_dir / config).read_text())
    sha = dir_sha256(model_dir)
    return {
        "kind": kind,
        "version": f"{prefix}:{sha[:12]}",
        "model_dir": str(model_dir.resolve()),
        "model_sha256": sha,
        "base_model": str(cfg.get("base_model", cfg.get("base_model_name", "all-MiniLM-L6-v2"))),
        "dataset_sha256": cfg.get("dataset_sha256"),
        "train_run_id": cfg.get("mlflow_run_id"),
        "prompt_version": cfg.get("input_format", kind),
    }


def register(record: dict, metrics: dict[str, float]) -> dict:
    """A new model version for an exported selector (a GGUF LLM or a ranker folder); returns
    its record with the registry version (and, for an LLM, the Ollama tag)."""
    c = client()
    if record["kind"] in FOLDER_KINDS:
        record = {**record, "model_dir": str(store_dir(Path(record["model_dir"]), record["model_sha256"]))}
        source, what = (
            Path(record["model_dir"]).as_uri(),
            f"{record['kind'].replace('_', '-')} from {record['base_model']}",
        )
    else:
        record = {**record, "gguf": str(store_gguf(Path(record["gguf"]), record["gguf_sha256"]))}
        source, what = (
            Path(record["gguf"]).parent.as_uri(),
            f"{record['base_model']} + LoRA, {record['quant']}, prompt {record['prompt_version']}",
        )
    tags = {
        k: str(record[k])
        for k in (
            "kind",
            "gguf",
            "gguf_sha256",
            "model_dir",
            "model_sha256",
            "quant",
            "prompt_version",
            "base_model",
            "dataset_sha256",
            "chunk_tokens",
            "profile",
            "store",
        )
        if record.get(k) is not None
    }
    tags.update({k: str(v) for k, v in metrics.items()})
    mv = c.create_model_version(MODEL, source=source, run_id=record.get("train_run_id"), tags=tags, description=what)
    record.update(version=f"{MODEL}:{mv.version}", registry_version=str(mv.version))
    if record["kind"] == "llm":
        record["ollama_tag"] = f"{MODEL}:{mv.version}"
    c.set_model_version_tag(MODEL, mv.version, "record", json.dumps(record))
    return record


def record_of(version: str) -> dict:
    """The record of a version ('3', 'pai-selector:3', 'champion', 'challenger' or 'first-stage', also by its old
    name); a record registered before the first stage's order was renamed reads as named now."""
    if current_name(version) == FIRST_STAGE:
        return dict(FIRST_STAGE_RECORD)
    c = client()
    v = version.split(":")[-1]
    try:
        mv = (
            c.get_model_version_by_alias(MODEL, v) if v in ("champion", "challenger") else c.get_model_version(MODEL, v)
        )
    except Exception as e:  # noqa: BLE001
        known = sorted(int(m.version) for m in c.search_model_versions(f"name='{MODEL}'"))
        raise RegistryError(
            f"no selector version {version!r} in the registry (known: {', '.join(map(str, known)) or 'none'})"
        ) from e
    if "record" not in mv.tags:
        raise RegistryError(f"{MODEL} version {mv.version} has no record tag (not registered by pai deploy)")
    return current_record(json.loads(mv.tags["record"]))


def champion(store: str | None = None) -> dict | None:
    """The champion's record; None without one, or, given `store`, where it was trained for another store (a
    registry shared by two stores: one store's champion is never another's baseline or fallback)."""
    try:
        record = record_of("champion")
    except RegistryError:
        return None
    return None if store and record.get("store") not in (None, store) else record


def history() -> list[str]:
    """Registry versions that were champion, oldest first ("first-stage" for none; its old name read as it)."""
    return [
        current_name(v) for v in json.loads(client().get_registered_model(MODEL).tags.get("champion_history", "[]"))
    ]


def verify(record: dict) -> None:
    """The GGUF a record names exists and is the one that was registered."""
    if current_name(record.get("kind")) == FIRST_STAGE:
        return
    if record.get("kind") == "cascade":
        verify(record["fast"])
        verify(record["slow"])
        return
    if record.get("kind") == "cross_encoder":
        raise RegistryError(f"{record['version']}: {CE_RETIRED}")
    if record.get("kind") in FOLDER_KINDS:
        folder = Path(record["model_dir"])
        if not folder.is_dir():
            raise RegistryError(f"{record['version']}: model folder {folder} is missing")
        if dir_sha256(folder) != record["model_sha256"]:
            raise RegistryError(f"{record['version']}: model folder {folder} does not match its registered sha256")
        return
    path = Path(record["gguf"])
    if not path.is_file():
        raise RegistryError(f"{record['version']}: GGUF {path} is missing")
    if files_sha256(path) != record["gguf_sha256"]:
        raise RegistryError(f"{record['version']}: GGUF {path} does not match its registered sha256")


def same_model(a: dict, b: dict) -> bool:
    """Whether two version records hold the same model (by content: a registry version per run is not)."""
    return any(a.get(k) and a.get(k) == b.get(k) for k in ("model_sha256", "gguf_sha256"))
