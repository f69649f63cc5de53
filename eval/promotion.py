"""Selector versions in the MLflow model registry (docs/architecture.md, "Contracts" 6) and the moves between them.

Each version of the registered model `pai-selector` carries its *version record* (the export's
`selector.json`: GGUF path and sha256, prompt format, base model, dataset hash, Ollama tag) and its
eval metrics as tags. Alias `champion` is what the service must run, `challenger` a candidate;
promotion and rollback move `champion` and announce the new record to the services (hot-swap). A
service that rejects it (failed canary) moves the alias back: nothing stays half-promoted.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.contracts.interleaving import TrialParams
from retrieval.db import connect, pai_home
from retrieval.files import dir_sha256, files_sha256
from retrieval.logs import deployments, trials
from retrieval.tracking import use_mlflow
from serving.selectors import CE_RETIRED, FOLDER_KINDS, SIMILARITY

MODEL = "pai-selector"


class RegistryError(RuntimeError):
    """A one-line reason a registry operation did not happen (nothing was changed)."""


@dataclass
class MoveResult:
    version: str
    deployment_id: int
    services: int  # services listening when it was announced
    applies: list[dict] = field(default_factory=list)

    @property
    def swap_ms(self) -> list[float]:
        return [a["swap_ms"] for a in self.applies if a["ok"]]


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
    """The record of a version ('3', 'pai-selector:3', 'champion', 'challenger' or 'similarity')."""
    if version == "similarity":
        return dict(SIMILARITY)
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
    return json.loads(mv.tags["record"])


def champion() -> dict | None:
    try:
        return record_of("champion")
    except RegistryError:
        return None


def history() -> list[str]:
    """Registry versions that were champion, oldest first ("similarity" for none)."""
    return json.loads(client().get_registered_model(MODEL).tags.get("champion_history", "[]"))


def _set_champion(c, record: dict, hist: list[str]) -> None:
    if record["kind"] == "similarity":
        try:
            c.delete_registered_model_alias(MODEL, "champion")
        except Exception:  # noqa: BLE001 - no alias to delete
            pass
    else:
        c.set_registered_model_alias(MODEL, "champion", record["registry_version"])
    c.set_registered_model_tag(MODEL, "champion_history", json.dumps(hist[-50:]))


def verify(record: dict) -> None:
    """The GGUF a record names exists and is the one that was registered."""
    if record.get("kind") == "similarity":
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


def move_champion(
    record: dict, action: str, reason: str | None, wait_s: float, previous: list[str] | None = None
) -> MoveResult:
    """Make `record` the champion and announce it; if a running service rejects it, move back."""
    verify(record)
    c = client()
    old_hist = history()
    hist = previous if previous is not None else [*old_hist, record.get("registry_version", "similarity")]
    before = champion() or dict(SIMILARITY)
    with connect() as conn:  # the database first: if it is down, the alias does not move
        _set_champion(c, record, hist)
        try:
            dep_id = deployments.announce(conn, record, action, reason)
        except Exception:
            _set_champion(c, before, old_hist)
            raise
        trials.stop(conn, f"the champion was moved by hand ({action} {record['version']})")  # its evidence is moot
        services = deployments.listening_services(conn)
        rows = deployments.wait_for_applies(conn, dep_id, services, wait_s) if services and wait_s > 0 else []
        failed = [r for r in rows if not r["ok"]]
        if failed:
            _set_champion(c, before, old_hist)
            deployments.announce(conn, before, "revert", f"{record['version']} rejected: {failed[0]['detail']}")
            raise RegistryError(
                f"{record['version']} rejected by service {failed[0]['service']}: {failed[0]['detail']}; "
                f"champion stays {before['version']}"
            )
    if record.get("registry_version"):
        _drop_challenger_alias(c, record["registry_version"])
    return MoveResult(record["version"], dep_id, services, rows)


def promote(version: str, reason: str | None = None, wait_s: float = 60.0) -> MoveResult:
    return move_champion(record_of(version), "promote", reason, wait_s)


def rollback(wait_s: float = 60.0) -> MoveResult:
    """Back to the champion before the current one (the similarity order before the first)."""
    hist = history()
    if not hist:
        raise RegistryError("nothing to roll back: no champion has been promoted")
    target = hist[-2] if len(hist) >= 2 else "similarity"
    return move_champion(record_of(target), "rollback", f"rollback from {hist[-1]}", wait_s, previous=hist[:-1])


def set_challenger(record: dict) -> None:
    client().set_registered_model_alias(MODEL, "challenger", record["registry_version"])


def record_trials() -> list[str]:
    """Write every closed trial's decision and evidence to the registry (tags on the challenger's version; a
    promotion moves `champion` there, the services having swapped already): one line each, oldest first."""
    lines = []
    with connect() as conn:
        for t in trials.unrecorded(conn):
            version = t.challenger_record.get("registry_version")
            if version:
                c = client()
                tags = {"trial_id": t.id, "trial_status": t.status, "trial_reason": t.reason}
                tags |= {f"trial_{k}": v for k, v in (t.evidence or {}).items() if k != "reason"}
                for k, v in tags.items():
                    c.set_model_version_tag(MODEL, version, k, str(v)[:5000])
                if t.status == "promoted":
                    _set_champion(c, t.challenger_record, [*history(), version])
                    _drop_challenger_alias(c, version)
            trials.mark_recorded(conn, t.id)
            lines.append(f"trial {t.id}: {t.challenger} vs {t.champion}: {t.status} ({t.reason})")
    return lines


def start_trial(record: dict, params: TrialParams) -> trials.Trial:
    """Put a registered challenger on trial against the champion (the similarity order before the first)."""
    verify(record)
    before = champion() or dict(SIMILARITY)
    with connect() as conn:
        trial = trials.start(conn, before, record, params)
    c = client()
    c.set_registered_model_alias(MODEL, "challenger", record["registry_version"])
    for k, v in {"trial_id": trial.id, "trial_status": "running", "trial_champion": before["version"]}.items():
        c.set_model_version_tag(MODEL, record["registry_version"], k, str(v))
    return trial


def running_trial() -> trials.Trial | None:
    with connect() as conn:
        return trials.running(conn)


def same_model(a: dict, b: dict) -> bool:
    """Whether two version records hold the same model (by content: a registry version per run is not)."""
    return any(a.get(k) and a.get(k) == b.get(k) for k in ("model_sha256", "gguf_sha256"))


def _drop_challenger_alias(c, version: str) -> None:
    try:
        if c.get_model_version_by_alias(MODEL, "challenger").version == version:
            c.delete_registered_model_alias(MODEL, "challenger")
    except Exception:  # noqa: BLE001 - no challenger alias
        pass
