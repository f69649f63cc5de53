"""The moves of the `champion` alias between selector versions (`eval.registry`): promotion and rollback move it
and announce the new record to the services (hot-swap); a service that rejects it (failed canary) moves the alias
back, so nothing stays half-promoted. A trial puts a challenger beside the champion; its recorded decision is
written to the registry, a promotion moving `champion` there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from retrieval.contracts.interleaving import TrialParams
from retrieval.contracts.selection import FIRST_STAGE
from retrieval.db import connect, store_id
from retrieval.logs import deployments, trials
from serving.selectors import FIRST_STAGE_RECORD

from .registry import MODEL, RegistryError, champion, client, history, record_of, verify


@dataclass
class MoveResult:
    version: str
    deployment_id: int
    services: int  # services listening when it was announced
    applies: list[dict] = field(default_factory=list)

    @property
    def swap_ms(self) -> list[float]:
        return [a["swap_ms"] for a in self.applies if a["ok"]]


def _set_champion(c, record: dict, hist: list[str]) -> None:
    if record["kind"] == FIRST_STAGE:
        try:
            c.delete_registered_model_alias(MODEL, "champion")
        except Exception:  # noqa: BLE001 - no alias to delete
            pass
    else:
        c.set_registered_model_alias(MODEL, "champion", record["registry_version"])
    c.set_registered_model_tag(MODEL, "champion_history", json.dumps(hist[-50:]))


def move_champion(
    record: dict, action: str, reason: str | None, wait_s: float, previous: list[str] | None = None
) -> MoveResult:
    """Make `record` the champion and announce it; if a running service rejects it, move back."""
    verify(record)
    c = client()
    old_hist = history()
    hist = previous if previous is not None else [*old_hist, record.get("registry_version", FIRST_STAGE)]
    with connect() as conn:  # the database first: if it is down, the alias does not move
        store = store_id(conn)
        if why := deployments.foreign_store(record, store):  # a registry shared by two stores
            raise RegistryError(f"not moved: {why}")
        before = champion(store) or dict(FIRST_STAGE_RECORD)
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
    """Back to the champion before the current one (the first-stage order before the first)."""
    hist = history()
    if not hist:
        raise RegistryError("nothing to roll back: no champion has been promoted")
    target = hist[-2] if len(hist) >= 2 else FIRST_STAGE
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
    """Put a registered challenger on trial against the champion (the first-stage order before the first)."""
    verify(record)
    with connect() as conn:
        store = store_id(conn)
        if why := deployments.foreign_store(record, store):
            raise RegistryError(f"no trial: {why}")
        before = champion(store) or dict(FIRST_STAGE_RECORD)
        trial = trials.start(conn, before, record, params)
    c = client()
    c.set_registered_model_alias(MODEL, "challenger", record["registry_version"])
    for k, v in {"trial_id": trial.id, "trial_status": "running", "trial_champion": before["version"]}.items():
        c.set_model_version_tag(MODEL, record["registry_version"], k, str(v))
    return trial


def running_trial() -> trials.Trial | None:
    with connect() as conn:
        return trials.running(conn)


def _drop_challenger_alias(c, version: str) -> None:
    try:
        if c.get_model_version_by_alias(MODEL, "challenger").version == version:
            c.delete_registered_model_alias(MODEL, "challenger")
    except Exception:  # noqa: BLE001 - no challenger alias
        pass
