"""Reading an answer's `[n]` citations against the context a query showed: which are labels (a candidate the
consumer was shown, or one logged before exposure was recorded), which name a candidate it was not shown, which
name none; and what a later feedback on the same query replaced. Pure: `feedback.record_feedback` writes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CITATION = re.compile(r"\[(\d{1,3})\]")


def cited_ranks(answer: str) -> list[int]:
    """Every number cited as `[3]` in an answer, in order of first citation (a candidate or not)."""
    return list(dict.fromkeys(map(int, _CITATION.findall(answer))))


@dataclass(frozen=True)
class Recorded:
    """What a feedback post did: the ranks it labelled used; of the answer's citations, those naming a candidate
    the consumer was not shown (`not_shown`) or no candidate (`unknown`), neither ever a label; whether the answer
    was stored (not when every citation missed: it speaks of another context); and the earlier state it replaced
    (`used_ranks`, `rating`, `answer`, `correction`: only what it changed, and only what was set before)."""

    used_ranks: list[int]
    not_shown: list[int] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    answer_recorded: bool = True
    replaced: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "used_ranks": self.used_ranks,
            "not_shown": self.not_shown,
            "unknown": self.unknown,
            "answer_recorded": self.answer_recorded,
            "replaced": self.replaced,
        }


def read_citations(answer: str, shown: dict[int, bool | None]) -> Recorded:
    """The answer's citations against `shown` (rank -> shown: True, False, or None when exposure is unknown).
    An answer citing nothing labels nothing used (every shown chunk ignored); one whose every citation missed
    labels nothing at all (`answer_recorded` False)."""
    cited = cited_ranks(answer)
    used = [n for n in cited if n in shown and shown[n] is not False]
    not_shown = [n for n in cited if shown.get(n, True) is False]
    unknown = [n for n in cited if n not in shown]
    return Recorded(used, not_shown, unknown, answer_recorded=bool(used) or not cited)


def replaced_state(before: dict, after: dict) -> dict:
    """The entries of `before` that `after` changed, of those set before (None: not set; `used_ranks` None:
    no labels yet)."""
    return {k: v for k, v in before.items() if v is not None and after.get(k) is not None and after[k] != v}
