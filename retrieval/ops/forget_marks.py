"""Selectors trained on forgotten data: marked in the MLflow registry (tag `forgotten_data`), read back by `pai status`
and `pai retrain`.

A selector learns from the feedback log only (the pull's export), so a version registered after the first logged
query that showed a forgotten memory may have trained on it; one registered before cannot have. Each such version
gets the tag `forgotten_data` = the day of the latest forget that touched its data. Its weights keep what they
learned until a retrain without it replaces the champion.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from ..db import pai_home
from ..tracking import SELECTOR_MODEL, use_mlflow

TAG = "forgotten_data"


def _registry_exists() -> bool:
    """A registry to mark: a tracking server, or the local store once something was logged to it."""
    return bool(os.environ.get("MLFLOW_TRACKING_URI")) or (pai_home() / "mlflow.db").exists()


def _versions():
    client = use_mlflow().MlflowClient()
    try:
        return client, client.search_model_versions(f"name='{SELECTOR_MODEL}'")
    except Exception as e:  # noqa: BLE001 - mlflow raises RestException when no model is registered yet
        if "RESOURCE_DOES_NOT_EXIST" in str(e) or "not found" in str(e).lower():
            return client, []
        raise


def mark(first_seen: datetime, now: datetime | None = None) -> list[str]:
    """Tag every selector version registered since `first_seen`; the versions tagged, oldest first."""
    if not _registry_exists():
        return []
    client, versions = _versions()
    since_ms = first_seen.timestamp() * 1000
    day = (now or datetime.now(UTC)).date().isoformat()
    out = []
    for v in sorted(versions, key=lambda v: int(v.version)):
        if v.creation_timestamp >= since_ms:
            client.set_model_version_tag(SELECTOR_MODEL, v.version, TAG, day)
            out.append(f"{SELECTOR_MODEL}:{v.version}")
    return out


def marked() -> dict[str, str]:
    """version -> the day its training data was last forgotten from, for every marked version."""
    if not _registry_exists():
        return {}
    _, versions = _versions()
    return {
        f"{SELECTOR_MODEL}:{v.version}": v.tags[TAG]
        for v in sorted(versions, key=lambda v: int(v.version))
        if TAG in v.tags
    }
