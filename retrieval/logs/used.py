"""What counts as used, defined once: a pulled feedback record's labels as build, train_ranker, evaluate's
held-out feedback and the trial read them (params.yaml `used`).

The log keeps what the consumer said: the `[n]` it cited, its rating, its answer. `used_labels` reads them
into one set of labels: the answer read again (`grounding.regrounded`: a shown chunk the answer quotes without
its `[n]` is a use), and the citations of a query rated -1 voided (its context did not answer it, so what its
answer cited there, or in the previews it was given, is not evidence of use: a consumer's false cites, which
on-policy reward the ranker's own misses). A judge's label on a chunk the consumer was not given (neither shown nor
previewed) stays, and a candidate without a label stays without.
"""

from __future__ import annotations

from ..params import UsedParams
from .grounding import regrounded


def used_labels(rec: dict, p: UsedParams) -> dict:
    """The feedback record (`feedback_records.FeedbackRecord`) relabelled by the one definition: re-grounded from its
    answer (`p.min_uncited`), then, rated -1 and `p.void_thumbs_down`, every `used` of a candidate the consumer was
    given (shown, or listed as a preview) False.
    A record without an answer is not re-grounded; one without labels comes back as is."""
    rec = regrounded(rec, p.min_uncited)
    voided = p.void_thumbs_down and rec.get("rating") == -1
    if not (voided and any(_cited_given(c) for c in rec["candidates"])):
        return rec
    return {**rec, "candidates": [{**c, "used": False} if _cited_given(c) else c for c in rec["candidates"]]}


def _cited_given(c: dict) -> bool:
    """Used, and given to the consumer: shown in its context, or listed as a preview."""
    return bool(c.get("used") and (c.get("shown") or c.get("previewed")))


def label_changes(records: list[dict], relabelled: list[dict]) -> dict[str, int]:
    """What `used_labels` changed (`relabelled[i]` = `used_labels(records[i], ...)`): uncited quotes counted as
    uses, and citations of the context of a query rated -1 voided. A change is counted once, by what it ended as
    (an uncited quote in a voided context is no change)."""
    out = {"uncited_quotes_used": 0, "thumbs_down_voided": 0}
    for r, g in zip(records, relabelled):
        for a, b in zip(r["candidates"], g["candidates"]):
            if a.get("used") != b.get("used"):
                out["thumbs_down_voided" if a.get("used") else "uncited_quotes_used"] += 1
    return out
