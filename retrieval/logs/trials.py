"""Trials by interleaving, in Postgres: which challenger is on trial against which champion, and what the
log says of it. The rule and the merge are `retrieval.contracts.interleaving`; this module keeps the trial's
row (migration 013) and reads its tallies from the feedback log, so every service on the store sees the same
trial and the same evidence, and a restarted one resumes it.

`start` opens a trial (stopping a running one) and tells the services (NOTIFY on the deployment channel);
`settle` reads the tallies under the trial's row lock and, when the rule decides, closes it, announcing the
challenger as the new champion in the same transaction when it won; undecided, it stores the evidence so far, which
sets the share of queries the services interleave. Whichever service or command settles
first decides; the others find it closed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from ..contracts.interleaving import Tally, TrialParams, Verdict
from ..contracts.selection import current_name, current_record
from .deployments import CHANNEL, announce

TRIAL_NOTICE = "trial"  # the NOTIFY payload that says a trial started or ended


@dataclass(frozen=True)
class Trial:
    id: int
    champion: str
    champion_record: dict
    challenger: str
    challenger_record: dict
    share: float
    rule: TrialParams  # the design it started with
    status: str  # running | promoted | rejected | stopped
    reason: str | None
    evidence: dict | None
    deployment_id: int | None
    recorded: bool
    created_at: datetime
    decided_at: datetime | None

    def as_dict(self) -> dict:
        out = asdict(self)
        out.pop("champion_record"), out.pop("challenger_record")
        return out | {"created_at": self.created_at.isoformat(), "decided_at": _iso(self.decided_at)}


_COLS = (
    "id, champion, champion_record, challenger, challenger_record, share, rule, status, reason, evidence,"
    " deployment_id, recorded, created_at, decided_at"
)


def _trial(row) -> Trial:
    """A row as named now (a trial against the first-stage order stored under its old name reads as it)."""
    names = (current_name(row[1]), current_record(row[2]), row[3], current_record(row[4]))
    rule = {"max_share": row[6]["share"], **row[6]}  # a trial registered before the share could rise keeps it fixed
    return Trial(row[0], *names, row[5], TrialParams(**rule), *row[7:])


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def start(conn: psycopg.Connection, champion: dict, challenger: dict, rule: TrialParams) -> Trial:
    """Put `challenger` (a version record) on trial against `champion`; a running trial is stopped."""
    if problems := rule.problems():
        raise ValueError("; ".join(problems))
    with conn.transaction():
        conn.execute(
            "UPDATE selector_trials SET status = 'stopped', reason = %s, decided_at = clock_timestamp()"
            " WHERE status = 'running'",
            (f"replaced by a trial of {challenger['version']}",),
        )
        row = conn.execute(
            f"INSERT INTO selector_trials (champion, champion_record, challenger, challenger_record, share, rule)"
            f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLS}",
            (
                champion["version"],
                Jsonb(champion),
                challenger["version"],
                Jsonb(challenger),
                rule.share,
                Jsonb(asdict(rule)),
            ),
        ).fetchone()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, TRIAL_NOTICE))
    return _trial(row)


def running(conn: psycopg.Connection) -> Trial | None:
    row = conn.execute(f"SELECT {_COLS} FROM selector_trials WHERE status = 'running'").fetchone()
    return _trial(row) if row else None


def get(conn: psycopg.Connection, trial_id: int) -> Trial | None:
    row = conn.execute(f"SELECT {_COLS} FROM selector_trials WHERE id = %s", (trial_id,)).fetchone()
    return _trial(row) if row else None


def recent(conn: psycopg.Connection, limit: int = 5) -> list[Trial]:
    return [_trial(r) for r in conn.execute(f"SELECT {_COLS} FROM selector_trials ORDER BY id DESC LIMIT %s", (limit,))]


def stop(conn: psycopg.Connection, reason: str) -> Trial | None:
    """End the running trial without a verdict (the champion stays); None when none runs."""
    with conn.transaction():
        row = conn.execute(
            f"UPDATE selector_trials SET status = 'stopped', reason = %s, decided_at = clock_timestamp()"
            f" WHERE status = 'running' RETURNING {_COLS}",
            (reason,),
        ).fetchone()
        if row:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, TRIAL_NOTICE))
    return _trial(row) if row else None


def trial_records(conn: psycopg.Connection, trial_id: int, query_ids: list[int] | None = None) -> list[dict]:
    """The trial's queries that have feedback (of `query_ids` only, when given), as feedback records (contract 3's keys
    the labels need, and `updated_at`: the version of the query they were read at) whose candidates carry their
    `team`: what the one definition of "used" reads."""
    rows = conn.execute(
        """SELECT q.id, q.text, q.answer, q.rating, q.threshold, q.updated_at,
                  json_agg(json_build_object('rank', c.rank, 'chunk_id', c.chunk_id, 'score', c.score,
                           'shown', c.shown, 'used', c.used, 'team', c.team, 'propensity', c.propensity,
                           'previewed', c.previewed, 'expanded', c.expanded, 'text', k.text) ORDER BY c.rank)
           FROM queries q JOIN query_candidates c ON c.query_id = q.id
           LEFT JOIN chunks k ON k.id = c.chunk_id AND k.content_hash = c.content_hash
           WHERE q.trial_id = %s AND (%s::bigint[] IS NULL OR q.id = ANY(%s)) AND (q.answer IS NOT NULL OR EXISTS
                 (SELECT 1 FROM query_candidates u WHERE u.query_id = q.id AND u.used IS NOT NULL))
           GROUP BY q.id ORDER BY q.id""",
        (trial_id, query_ids, query_ids),
    ).fetchall()
    keys = ("query_id", "query", "answer", "rating", "threshold", "updated_at", "candidates")
    return [dict(zip(keys, r)) for r in rows]


def exposed_teams(rec: dict) -> dict[int, str]:
    """rank -> side of what a trial query put before the consumer: its context and the previews one side alone would
    serve (`serving.picker.Picker.interleave` logs both)."""
    return {c["rank"]: c["team"] for c in rec["candidates"] if (c.get("shown") or c.get("previewed")) and c.get("team")}


def tally(records: list[dict]) -> Tally:
    """The challenger's wins, losses and ties over the cited queries (those where something shown or previewed was
    used), and the cited queries whose context showed nothing one side alone would serve (`same`, not judged)."""
    out = Tally()
    for rec in records:
        teams = exposed_teams(rec)
        out.add(teams, {c["rank"] for c in rec["candidates"] if c.get("used") and c["rank"] in teams})
    return out


def kind(rec: dict) -> str:
    """One query's outcome as the rule reads it (`tally` of it alone): win, loss or tie; same (cited, nothing one side
    alone would serve); none (nothing it was shown or previewed cited)."""
    t = tally([rec])
    return "win" if t.wins else "loss" if t.losses else "tie" if t.ties else "same" if t.same else "none"


def _refresh(conn: psycopg.Connection, trial_id: int, relabel: Callable[[dict], dict]) -> None:
    """Bring trial_outcomes (migration 022) up to date: only the queries logged or changed since the last read (no
    row, or their updated_at moved) are read from the log again, with `relabel`, the one definition of "used"."""
    stale = [
        (qid, updated)
        for qid, updated in conn.execute(
            """SELECT q.id, q.updated_at FROM queries q LEFT JOIN trial_outcomes o ON o.query_id = q.id
               WHERE q.trial_id = %s AND (o.query_id IS NULL OR o.seen_at <> q.updated_at)""",
            (trial_id,),
        )
    ]
    if stale:
        read = {r["query_id"]: r for r in trial_records(conn, trial_id, [q for q, _ in stale])}
        rows = [
            # a query without feedback reads as none, at the version seen; its feedback moves updated_at
            (q, trial_id, read[q]["updated_at"], kind(relabel(read[q]))) if q in read else (q, trial_id, u, "none")
            for q, u in stale
        ]
        with conn.cursor() as cur:  # a reader beside settle's never overwrites a newer read of a query with an older
            cur.executemany(
                """INSERT INTO trial_outcomes (query_id, trial_id, seen_at, kind) VALUES (%s, %s, %s, %s)
                   ON CONFLICT (query_id) DO UPDATE SET trial_id = excluded.trial_id, seen_at = excluded.seen_at,
                   kind = excluded.kind WHERE trial_outcomes.seen_at <= excluded.seen_at""",
                rows,
            )


def outcomes(conn: psycopg.Connection, trial_id: int, relabel: Callable[[dict], dict]) -> list[str]:
    """Each of the trial's queries' outcome (`kind`), in query order, as kept (`_refresh`: the rest are one small row
    each)."""
    _refresh(conn, trial_id, relabel)
    sql = "SELECT kind FROM trial_outcomes WHERE trial_id = %s ORDER BY query_id"
    return [k for (k,) in conn.execute(sql, (trial_id,))]


def verdict(conn: psycopg.Connection, trial: Trial, relabel: Callable[[dict], dict]) -> Verdict:
    """The rule read on the trial's log now: its kept outcomes counted (`_refresh`); `relabel` is the one definition of
    "used" applied to each record read."""
    _refresh(conn, trial.id, relabel)
    counts = dict(
        conn.execute("SELECT kind, count(*) FROM trial_outcomes WHERE trial_id = %s GROUP BY kind", (trial.id,))
    )
    return Tally(*(counts.get(k, 0) for k in ("win", "loss", "tie", "same"))).verdict(trial.rule)


def settle(conn: psycopg.Connection, trial_id: int, relabel: Callable[[dict], dict]) -> Trial | None:
    """Read trial `trial_id`'s rule now: the trial closed when it decides (promoted with the challenger announced as
    champion, or rejected); the trial still running with its evidence so far stored (`evidence`: the share of
    queries it interleaves rises with it, `TrialParams.share_at`); None when no such trial runs (already closed by
    someone else)."""
    with conn.transaction():
        row = conn.execute(
            f"SELECT {_COLS} FROM selector_trials WHERE id = %s AND status = 'running' FOR UPDATE", (trial_id,)
        ).fetchone()
        if row is None:
            return None
        trial = _trial(row)
        v = verdict(conn, trial, relabel)
        if v.decision is None:
            row = conn.execute(
                f"UPDATE selector_trials SET evidence = %s WHERE id = %s RETURNING {_COLS}",
                (Jsonb(v.as_dict()), trial_id),
            ).fetchone()
            return _trial(row)
        dep_id = None
        if v.decision == "promote":
            dep_id = announce(conn, trial.challenger_record, "promote", f"won trial {trial.id}: {v.reason}")
        row = conn.execute(
            f"UPDATE selector_trials SET status = %s, reason = %s, evidence = %s, deployment_id = %s,"
            f" decided_at = clock_timestamp() WHERE id = %s RETURNING {_COLS}",
            ("promoted" if v.decision == "promote" else "rejected", v.reason, Jsonb(v.as_dict()), dep_id, trial_id),
        ).fetchone()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, TRIAL_NOTICE))
    return _trial(row)


def unrecorded(conn: psycopg.Connection) -> list[Trial]:
    """Closed trials whose decision the MLflow registry does not hold yet, oldest first."""
    return [
        _trial(r)
        for r in conn.execute(
            f"SELECT {_COLS} FROM selector_trials WHERE status <> 'running' AND NOT recorded ORDER BY id"
        )
    ]


def mark_recorded(conn: psycopg.Connection, trial_id: int) -> None:
    conn.execute("UPDATE selector_trials SET recorded = true WHERE id = %s", (trial_id,))
