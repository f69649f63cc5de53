"""`python -m eval.bench.trial_settle TRIAL_ID [--params P] [--repeats N]`: what one settle of a trial costs, on the store
$PAI_HOME / DATABASE_URL names. Side by side in one run: every record of the trial read and relabelled (what a settle did
before migration 022), the first read into trial_outcomes (once per trial), and then a settle after one query changed
(what each feedback pays now); and whether the tallies agree. It rewrites the trial's kept outcomes and moves one
query's updated_at: run it on a lab store (a `pai lab cycle` home), not on a memory in use.

AMD EPYC figures: docs/measurements.md, "A settle reads only what changed"."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from retrieval.db import connect
from retrieval.logs import trials
from retrieval.logs.used import used_labels
from retrieval.params import UsedParams, load_section


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trial", type=int)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    used = load_section(a.params, "used", UsedParams)
    relabel = lambda rec: used_labels(rec, used)  # noqa: E731 - the service's one definition of "used"
    with connect() as conn:
        t = trials.get(conn, a.trial)
        if t is None:
            raise SystemExit(f"trial {a.trial}: not in this store")
        (n,) = conn.execute("SELECT count(*) FROM queries WHERE trial_id = %s", (a.trial,)).fetchone()
        t0 = time.perf_counter()
        every = trials.tally([relabel(r) for r in trials.trial_records(conn, a.trial)])
        t1 = time.perf_counter()
        conn.execute("DELETE FROM trial_outcomes WHERE trial_id = %s", (a.trial,))
        t2 = time.perf_counter()
        trials.verdict(conn, t, relabel)
        t3 = time.perf_counter()
        after = []
        for _ in range(a.repeats):
            conn.execute(
                "UPDATE queries SET updated_at = clock_timestamp() WHERE id = (SELECT max(id) FROM queries"
                " WHERE trial_id = %s AND answer IS NOT NULL)",
                (a.trial,),
            )
            s = time.perf_counter()
            kept = trials.verdict(conn, t, relabel)
            after.append(time.perf_counter() - s)
    print(
        f"trial {a.trial}: {n} trial queries; every record read and relabelled: {t1 - t0:.3f} s; the first read into "
        f"trial_outcomes: {t3 - t2:.3f} s; a settle after one query changed: median {statistics.median(after) * 1000:.1f}"
        f" ms of {a.repeats} ({(t1 - t0) / statistics.median(after):.0f}x less)"
    )
    same = (every.wins, every.losses, every.ties, every.same) == (kept.wins, kept.losses, kept.ties, kept.same)
    print(
        f"tallies: every record {every.wins}/{every.losses}/{every.ties}/{every.same}, kept {kept.wins}/{kept.losses}/"
        f"{kept.ties}/{kept.same} (wins/losses/ties/same): {'the same' if same else 'DIFFER'}"
    )


if __name__ == "__main__":
    main()
