"""The feedback log's export (stage `pull`): one `FeedbackRecord` per line of `feedback.jsonl`, and the watermark
beside it; how training and evaluation read a record: the split by query text (`split_of`), the candidates above
the threshold, a label's inverse-propensity weight."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import TypedDict

FEEDBACK_FILE = "feedback.jsonl"  # the pull stage's export: the latest state of every query, one record a line
WATERMARK_FILE = "watermark.json"  # beside it: (updated_at, query_id) of the last row pulled, and its store
WORKSPACES = ".pai-workspaces"  # in the checkout: each other store's pipeline files, parked under its id


class FeedbackCandidate(TypedDict):
    """One candidate a query was shown, with what became of it."""

    rank: int  # 1-based retrieval rank
    chunk_id: int
    content_hash: str
    score: float
    source: str | None  # None (with heading and text) when the chunk changed or was deleted since
    heading: str | None
    parent_heading: str | None  # the heading path's upper part: the passage text is `parent / heading` + text
    text: str | None
    pick_rank: int | None  # its place in the selector's pick, None if not picked
    served_rank: int | None  # its place in the served order the context was cut from, None if not in it
    shown: bool | None  # in the context given to the consumer; None: logged before exposure was recorded
    propensity: float | None  # P(shown) under the serving policy, exploration included
    previewed: bool | None  # listed after the context as a one-line preview; None: logged before previews
    preview_propensity: float | None  # P(previewed) under the serving policy
    expanded: bool | None  # the consumer read the preview whole (`expand`)
    used: bool | None  # used (cited) / ignored (shown or expanded, not cited); None = no label


class FeedbackRecord(TypedDict):
    """One exported query (contract 3, as a file): plain JSON, read by key."""

    query_id: int
    query: str
    created_at: str  # ISO 8601
    updated_at: str
    selector_version: str | None
    picked_by: str | None
    prompt_version: str | None
    selection_status: str | None
    threshold: float | None  # candidates scored below it were not shown to the selector
    rating: int | None  # +1 / -1
    correction: str | None
    answer: str | None
    candidates: list[FeedbackCandidate]


CANDIDATE_KEYS = tuple(FeedbackCandidate.__annotations__)


def normalize_query(query: str) -> str:
    """Same query, same topic: case and spacing do not matter (cache keys, splits, duplicates)."""
    return re.sub(r"\s+", " ", query.strip().lower())


def query_position(query: str) -> float:
    """Where a query falls in [0, 1], by a hash of its normalised text: splits are bands of this."""
    return int(hashlib.sha256(normalize_query(query).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def split_of(query: str, val_fraction: float) -> str:
    """Deterministic split by normalised query text: the same query always lands in the same split."""
    return "val" if query_position(query) < val_fraction else "train"


def above_threshold(rec: FeedbackRecord) -> list[FeedbackCandidate]:
    """The candidates scored at or above the query's threshold: what a selector is given. Not `shown`, which is
    what the consumer's context held (docs/architecture.md, "Words with one meaning")."""
    threshold = rec.get("threshold")
    return [c for c in rec["candidates"] if threshold is None or c["score"] >= threshold]


def pulled_through(folder: Path, store: str | None = None) -> tuple[datetime, int, str | None] | None:
    """The pull stage's watermark in `folder`: every query at or below (updated_at, id) of its scope (None: of
    every scope) is exported. None when nothing was pulled, the file cannot be read, or it was pulled from another
    store than `store` (the database's `store_identity`; then nothing of this one counts as pulled)."""
    try:
        w = json.loads((folder / WATERMARK_FILE).read_text(encoding="utf-8"))
        if w.get("store") != store:
            return None
        return datetime.fromisoformat(w["updated_at"]), int(w["query_id"]), w.get("scope")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing, "-infinity", malformed: not pulled
        return None


def ipw(c: FeedbackCandidate, clip: float) -> float:
    """A label's inverse-propensity weight: 1 / max(P(shown), clip) for what the consumer was shown under the
    serving policy (a chunk exploration put in the context counts for the many like it the policy hid);
    1 / max(P(previewed), clip) for a preview the consumer read or cited (its label exists because it was listed);
    1 for a judge's label or a row logged before exposure was recorded."""
    p = c.get("propensity")
    if c.get("shown") and p is not None:
        return 1.0 / max(float(p), clip)
    q = c.get("preview_propensity")
    return 1.0 / max(float(q), clip) if c.get("previewed") and q is not None else 1.0
