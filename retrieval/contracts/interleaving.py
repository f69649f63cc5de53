"""The trial by interleaving: what serving, the trial's bookkeeping and the lab compute the same way.

`agreed_first` makes a trial query's context from the champion's and the challenger's rankings: the items both
top k hold (k: as many as the smaller of the two sides' own contexts holds), in the champion's order, then the
items they disagree on, merged by `team_draft` (Radlinski, Kurup and Joachims 2008: the teams take turns, the one
with fewer items placed picks next, a coin decides a tie, each adding its best item not yet placed) until the
context holds k. So
each side shows half of what it alone would have served and the other would not (a coin gives the odd one), the
same count whichever ranks its own items higher: an uninformative citation (a false cite, a cite of what both
serve) is as likely to credit either side.

`sides` says, of each item in that context, whose own context of the same size would have held it: the
champion's alone, the challenger's alone, or both. Only the first two earn credit: an item both would have served
says nothing about which is better. What is left is the served contexts' difference, the thing Recall@k compares:
a query whose cited items were more the challenger's alone is a win for it, more the champion's alone a loss, else
a tie. A cited query whose context showed nothing one side alone would serve (the two agreed on all k) is `same`:
it is not judged.

The previews count too. The draft goes on past the context, so the first preview lines listed after it
(`retrieval.query.previews.following`) are the rest of each side's own items: every item one side alone would serve
is before the consumer, about half in the context and half a line below it, and the draft's coin decides which
half. A cited preview earns its side the credit a cited context item does (a query's context and previews are
`sides`' items): a query whose context citations were all of items both serve, a tie before, is decided by a
preview of one side's own that the consumer read whole and cited.

Why not the plain team-draft merge cut at k (the design served before, kept in the lab as `team-draft`): in its
first k each team places its best items, so a side whose own-only items sit at the top of its ranking shows all of
them while the other's (ranked lower in its own list) are often cut, and every false cite then favours the first.
On a demo's logged trial that made a challenger better by +0.018 served Recall lose 26 to 43, and, replayed, it
promoted one worse by 0.010 in 11 of 20 trials (docs/measurements.md, "The trial's exposure"). `pai lab trial`
measures the designs on real orders.

`decide` is the pre-registered stopping rule: a sequential sign test on the wins and losses, read after every
judged query. Its statistic is a mixture likelihood ratio (mSPRT; Robbins 1970, Johari et al. 2017): the
likelihood of the wins and losses averaged over win rates p in (0.5, 0.5 + max_effect], divided by their
likelihood at p = 0.5. Under "the challenger is no better" (p <= 0.5) it is a non-negative supermartingale, so
by Ville's inequality it ever reaches 1 / alpha with probability at most alpha: the trial may be read after
every query, by every service, with no correction for looks. The mirror statistic rejects a challenger that
is surely worse; a trial that reaches `max_judged` judged queries without proof rejects it too (the champion
stays: promotion needs evidence, rejection only needs its absence), and so does one that reaches `max_cited`
cited queries in all (a challenger that almost never serves anything else).

How many queries a trial interleaves is `TrialParams.share_at`: `share` at first, rising with the evidence for the
challenger up to `max_share`. A challenger that is winning decides in fewer of the users' queries; one that is not
costs what a fixed share did. The test is untouched: it reads the interleaved queries alone, and which ones are
interleaved is decided by coins and the past.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

CHAMPION, CHALLENGER, BOTH = "champion", "challenger", "both"
TEAMS = (CHAMPION, CHALLENGER)
_GRID = 64  # win rates the mixture averages over


def team_draft(champion: Sequence[Hashable], challenger: Sequence[Hashable], rng: random.Random) -> list[tuple]:
    """(item, team) in served order: both rankings merged by team-draft until every item of either is placed."""
    out: list[tuple] = []
    placed: set = set()
    count = {CHAMPION: 0, CHALLENGER: 0}
    rankings = {CHAMPION: list(champion), CHALLENGER: list(challenger)}
    while True:
        left = {t: [x for x in rankings[t] if x not in placed] for t in TEAMS}
        if not left[CHAMPION] and not left[CHALLENGER]:
            return out
        if not left[CHAMPION] or not left[CHALLENGER]:
            team = CHALLENGER if left[CHALLENGER] else CHAMPION
        elif count[CHAMPION] != count[CHALLENGER]:
            team = CHAMPION if count[CHAMPION] < count[CHALLENGER] else CHALLENGER
        else:
            team = CHALLENGER if rng.random() < 0.5 else CHAMPION
        item = left[team][0]
        out.append((item, team))
        placed.add(item)
        count[team] += 1


def draft_propensity(
    champion: Sequence[Hashable], challenger: Sequence[Hashable], depth: int, firsts: int | None = None
) -> tuple[dict, dict]:
    """(item -> P(among the merge's first `firsts`), item -> P(among its first `depth`)) over `team_draft`'s coins,
    every outcome enumerated with its probability: the exposure a trial query gives each item (an item only the
    challenger ranks high is shown about half the time, and its label weighs for the times it was not). Cheap: a
    coin is tossed only when the teams are level, so `depth` d has at most 2^(d/2) outcomes (d 15: 128)."""
    firsts = depth if firsts is None else firsts
    rankings = {CHAMPION: list(champion), CHALLENGER: list(challenger)}
    top: dict = {}
    deep: dict = {}

    def go(out: list, placed: set, at: dict, count: dict, p: float) -> None:
        while len(out) < depth:
            for t in TEAMS:  # each team's next item not yet placed
                while at[t] < len(rankings[t]) and rankings[t][at[t]] in placed:
                    at[t] += 1
            has = {t: at[t] < len(rankings[t]) for t in TEAMS}
            if not any(has.values()):
                break
            if not all(has.values()):
                team = CHALLENGER if has[CHALLENGER] else CHAMPION
            elif count[CHAMPION] != count[CHALLENGER]:
                team = CHAMPION if count[CHAMPION] < count[CHALLENGER] else CHALLENGER
            else:  # the coin: both ways, each with half the probability
                other = {**count, CHAMPION: count[CHAMPION] + 1}
                x = rankings[CHAMPION][at[CHAMPION]]
                go([*out, x], placed | {x}, dict(at), other, p / 2)
                team, p = CHALLENGER, p / 2
            x = rankings[team][at[team]]
            out, placed = [*out, x], placed | {x}
            count = {**count, team: count[team] + 1}
        for i, x in enumerate(out):
            deep[x] = deep.get(x, 0.0) + p
            if i < firsts:
                top[x] = top.get(x, 0.0) + p

    go([], set(), {CHAMPION: 0, CHALLENGER: 0}, {CHAMPION: 0, CHALLENGER: 0}, 1.0)
    return {x: round(v, 6) for x, v in top.items()}, {x: round(v, 6) for x, v in deep.items()}


def _split(champion: Sequence[Hashable], challenger: Sequence[Hashable], k: int) -> tuple[list, list, list]:
    """(the items both top k hold, in the champion's order; the champion's ranking without them; the challenger's)."""
    both = set(challenger[:k])
    agreed = [x for x in champion[:k] if x in both]
    taken = set(agreed)
    return agreed, [x for x in champion if x not in taken], [x for x in challenger if x not in taken]


def agreed_first(
    champion: Sequence[Hashable], challenger: Sequence[Hashable], k: int, rng: random.Random
) -> tuple[list, int]:
    """(the served order, how many of it agree): the items both top k hold, in the champion's order, then every other
    item of either ranking merged by `team_draft`. The context is its first k: the agreed items and k - agreed of
    the draft, which are each side's own top-k items only (each side places at most half of them)."""
    agreed, mine, theirs = _split(champion, challenger, k)
    rest = team_draft(mine, theirs, rng)
    return agreed + [x for x, _ in rest], len(agreed)


def agreed_propensity(
    champion: Sequence[Hashable], challenger: Sequence[Hashable], k: int, depth: int
) -> tuple[dict, dict]:
    """(item -> P(in the context: `agreed_first`'s first k), item -> P(among its first `depth`)) over the draft's
    coins: an agreed item always, an item one side alone holds about half the time."""
    agreed, mine, theirs = _split(champion, challenger, k)
    top, deep = draft_propensity(mine, theirs, max(depth - len(agreed), 0), max(k - len(agreed), 0))
    sure = dict.fromkeys(agreed, 1.0)
    return {**sure, **top}, {**sure, **deep}


def sides(
    items: Sequence[Hashable], champion: Sequence[Hashable], challenger: Sequence[Hashable], k: int | None = None
) -> dict:
    """item -> CHAMPION, CHALLENGER or BOTH: whose top k (default len(items)) holds each of `items` (a context, or a
    context and its previews); an item neither top k holds (a preview below both cuts) has no side and is left out."""
    k = len(items) if k is None else k
    mine, theirs = set(champion[:k]), set(challenger[:k])
    held = mine | theirs
    return {x: BOTH if x in mine and x in theirs else CHAMPION if x in mine else CHALLENGER for x in items if x in held}


def differs(teams: dict[Hashable, str]) -> bool:
    """Whether a query's context showed an item one side alone would have served (`sides`): else the two served the
    same there, and its citations say nothing of which is better."""
    return any(t in TEAMS for t in teams.values())


def outcome(teams: dict[Hashable, str], used: set) -> int:
    """+1 the challenger wins this query, -1 it loses, 0 a tie: the used items of each side, compared.
    `teams`: item -> side (`sides`) of the items the consumer was shown; used items outside it, or on both
    sides, earn no credit."""
    champion = sum(1 for x in used if teams.get(x) == CHAMPION)
    challenger = sum(1 for x in used if teams.get(x) == CHALLENGER)
    return (challenger > champion) - (challenger < champion)


@dataclass
class Tally:
    """A trial's counts over its cited queries, each added as it comes (`add`): the one bookkeeping the service's log
    (`retrieval.logs.trials.tally`) and the lab's simulations keep."""

    wins: int = 0
    losses: int = 0
    ties: int = 0
    same: int = 0  # cited queries whose context both sides would have served alike: not judged

    def add(self, teams: dict[Hashable, str], used: set) -> None:
        """One query: `teams` the side (`sides`) of each item shown, `used` the items cited (none: not counted)."""
        if not used:
            return
        if not differs(teams):
            self.same += 1
            return
        o = outcome(teams, used)
        self.wins, self.losses, self.ties = self.wins + (o > 0), self.losses + (o < 0), self.ties + (o == 0)

    def verdict(self, rule: TrialParams) -> Verdict:
        return decide(self.wins, self.losses, self.ties, rule, self.same)


@dataclass(frozen=True)
class TrialParams:
    """A trial's design, fixed when it starts and stored with it (pre-registered): the share of queries interleaved and
    the sequential stopping rule. Read by the deploy stages and `pai lab trial`."""

    share: float = 0.2
    """of queries served interleaved while a trial runs, at first; the others get the champion alone"""
    max_share: float = 0.6
    """the share rises with the evidence for the challenger (`share_at`), up to this; at or below `share`: fixed"""
    alpha: float = 0.05
    """the chance of promoting a challenger that is no better, at most (sequential sign test, any number of looks)"""
    max_judged: int = 800
    """judged trial queries (cited, and the context showed something one side alone would serve) after which a
    challenger not yet proven better is rejected (the champion stays)"""
    max_cited: int = 4000
    """cited trial queries in all after which a challenger not yet proven better is rejected: one that serves the
    champion's context on almost every query does not hold its trial for ever"""
    max_effect: float = 0.2
    """the win rates the test's mixture averages over run from 0.5 to 0.5 + this"""

    def problems(self) -> list[str]:
        out = []
        if not 0 < self.share <= 1:
            out.append("trial.share must be in (0, 1]")
        if not 0 < self.max_share <= 1:
            out.append("trial.max_share must be in (0, 1]")
        if not 0 < self.alpha < 1:
            out.append("trial.alpha must be in (0, 1)")
        if self.max_judged < 1:
            out.append("trial.max_judged must be >= 1")
        if self.max_cited < self.max_judged:
            out.append("trial.max_cited must be >= trial.max_judged")
        if not 0 < self.max_effect <= 0.5:
            out.append("trial.max_effect must be in (0, 0.5]")
        return out

    def share_at(self, evidence_for: float) -> float:
        """The share of queries to interleave now, given the evidence for the challenger so far (1 at the start):
        `share` times that evidence, up to `max_share`, never below `share`. The test reads interleaved queries
        only, and which queries are interleaved depends on the past alone, so its error rates stay as they are; a
        challenger no better keeps an evidence whose expectation stays at most 1, so its trial interleaves at most
        twice `share` in expectation, and a worse one's evidence sinks, keeping it near `share`."""
        return max(self.share, min(self.max_share, self.share * evidence_for))


def log_evidence(wins: int, losses: int, max_effect: float) -> float:
    """log of the mixture likelihood ratio for "the challenger wins more often than it loses"."""
    terms = []
    for i in range(1, _GRID + 1):
        p = 0.5 + max_effect * i / _GRID
        terms.append(wins * math.log(2 * p) + (losses * math.log(2 * (1 - p)) if losses else 0.0))
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms) / _GRID)


@dataclass(frozen=True)
class Verdict:
    decision: str | None  # "promote", "reject", or None (the trial goes on)
    reason: str
    wins: int
    losses: int
    ties: int
    judged: int  # wins + losses + ties: cited trial queries whose context showed something one side alone would serve
    evidence_for: float  # the mixture likelihood ratio for the challenger (promote at 1 / alpha)
    evidence_against: float  # the mirror: the challenger loses more often (reject at 1 / alpha)
    same: int = 0  # cited trial queries whose context both sides would have served alike (not judged)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def decide(wins: int, losses: int, ties: int, rule: TrialParams, same: int = 0) -> Verdict:
    """The rule read on the trial's tallies so far (`ties`: judged queries whose credit was equal; `same`: cited
    queries whose context the two would have served alike)."""
    judged = wins + losses + ties
    bound = math.log(1 / rule.alpha)
    up, down = log_evidence(wins, losses, rule.max_effect), log_evidence(losses, wins, rule.max_effect)
    shown = (round(math.exp(min(up, 700)), 3), round(math.exp(min(down, 700)), 3))
    head = f"{wins} wins, {losses} losses, {ties} ties in {judged} judged queries" + (
        f" (and {same} cited with the same context)" if same else ""
    )
    tallies = (wins, losses, ties, judged, *shown, same)
    if up >= bound:
        why = f"{head}: evidence {shown[0]:g} >= {1 / rule.alpha:g} that the challenger is better"
        return Verdict("promote", why, *tallies)
    if down >= bound:
        why = f"{head}: evidence {shown[1]:g} >= {1 / rule.alpha:g} that the challenger is worse"
        return Verdict("reject", why, *tallies)
    if judged >= rule.max_judged:
        why = f"{head}: no proof of a gain within {rule.max_judged} (evidence {shown[0]:g} < {1 / rule.alpha:g})"
        return Verdict("reject", why, *tallies)
    if judged + same >= rule.max_cited:
        bound_s = f"{1 / rule.alpha:g}"
        why = f"{head}: no proof of a gain within {rule.max_cited} cited queries (evidence {shown[0]:g} < {bound_s})"
        return Verdict("reject", why, *tallies)
    return Verdict(None, f"{head}: running", *tallies)
