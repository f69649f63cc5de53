"""The one factory for the feedback log's exported records (`retrieval.logs.feedback_records.FeedbackRecord`), as the pull
stage writes them: the tests of build, train_ranker, evaluate, the grounding report and the one definition of used
build their records here, so a field added to the export is added once."""

from __future__ import annotations


def candidate(
    rank: int,
    used: bool | None = None,
    shown: bool | None = True,
    propensity: float | None = 1.0,
    *,
    text: str | None = None,
    score: float = 0.5,
    heading: str | None = None,
    **fields,
) -> dict:
    """One exported candidate at 1-based `rank`: `used` its label (None: none), `shown` whether it was in the
    consumer's context (None: logged before exposure was recorded), `propensity` P(shown); its text
    "passage {rank}" unless given. `fields` overrides any other key (chunk_id, source, ...)."""
    return {
        "rank": rank,
        "chunk_id": rank,
        "content_hash": "h",
        "score": score,
        "source": f"/d/{rank}.md",
        "heading": heading,
        "parent_heading": None,
        "text": f"passage {rank}" if text is None else text,
        "pick_rank": None,
        "served_rank": rank,
        "shown": shown,
        "propensity": propensity,
        "used": used,
    } | fields


def record(
    candidates: list[dict],
    query: str = "q",
    query_id: int = 1,
    *,
    threshold: float | None = None,
    answer: str | None = None,
    rating: int | None = None,
    **fields,
) -> dict:
    """One exported query with its `candidates` (`candidate`), as the pull stage writes it."""
    return {
        "query_id": query_id,
        "query": query,
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "selector_version": "first-stage",
        "picked_by": None,
        "prompt_version": None,
        "selection_status": None,
        "threshold": threshold,
        "rating": rating,
        "correction": None,
        "answer": answer,
        "candidates": candidates,
    } | fields
