"""The lab's simulated consumer, as params.yaml's `replay` section reads it (what the consumer does is
cli/lab/replay.py). The section's dataclass sits here, beside the other sections', so that cli/knobs.py documents every
section of params.yaml without importing the lab."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplayParams:
    """The lab's simulated consumer that posts the feedback. Read by `pai lab simulate`, `pai lab cycle` and `pai lab
    loop report`."""

    consumer: str = "realistic"
    """realistic: cites [n] within the context it was given only (what a real consumer can say); oracle: a judge of
    all 20 candidates, the upper bound (`pai lab loop report --consumer oracle`)"""
    miss_rate: float = 0.2
    """realistic: a relevant chunk in the context left uncited"""
    false_cite_rate: float = 0.05
    """realistic: an irrelevant chunk in the context cited anyway"""
    false_cite_grounded: float = 0.5
    """realistic: share of false cites whose sentence quotes the chunk (it used one that did not answer); the rest put
    [n] on a claim chunk n does not hold (a misattribution)"""
    miss_quoted: float = 0.5
    """realistic: share of misses whose chunk the answer still quotes, without its [n]"""
    previews_read: int = 10
    """realistic: how many of the previews listed after the context (search.previews) the consumer reads"""
    expand_relevant: float = 0.5
    """realistic: the chance it reads a relevant preview whole (`expand`); 0 = a consumer that never expands, 0.8 = one
    that expands as often as it cites (1 - miss_rate)"""
    expand_irrelevant: float = 0.05
    """realistic: the chance it reads an irrelevant preview whole"""
    seed: int = 0
    """the realistic consumer's draws"""

    def problems(self) -> list[str]:
        out = []
        if self.consumer not in ("oracle", "realistic"):
            out.append(f"replay.consumer must be oracle or realistic, not {self.consumer!r}")
        if not all(
            0 <= x <= 1
            for x in (
                self.miss_rate,
                self.false_cite_rate,
                self.false_cite_grounded,
                self.miss_quoted,
                self.expand_relevant,
                self.expand_irrelevant,
            )
        ):
            out.append(
                "replay: need miss_rate, false_cite_rate, false_cite_grounded, miss_quoted, expand_relevant and"
                " expand_irrelevant in [0, 1]"
            )
        if self.previews_read < 0:
            out.append("replay.previews_read must be >= 0")
        return out
