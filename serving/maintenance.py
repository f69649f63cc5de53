"""Maintenance in the service: `retrieval.ops.maintain.run` every maintain.interval_minutes, in a thread
with its own connection, so queries never wait for it. The first run comes one interval after
start-up. Several services on one database take turns: the run's advisory lock makes the others
skip that round."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from retrieval.db import connect
from retrieval.ops import maintain
from retrieval.params import ForgetParams, MaintainParams, SearchParams

log = logging.getLogger("uvicorn.error")  # the service's own log (`pai serve` prints it at INFO)


class MaintenanceLoop:
    def __init__(
        self, db_url: str, mp: MaintainParams, sp: SearchParams, staging_dir: Path, fp: ForgetParams | None = None
    ):
        self.db_url, self.mp, self.sp, self.staging_dir, self.fp = db_url, mp, sp, staging_dir, fp
        self.last: dict | None = None  # the latest run's report (skipped runs too), or its error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="maintenance", daemon=True)

    def start(self) -> None:
        if self.mp.interval_minutes > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def run_once(self) -> dict:
        try:
            with connect(self.db_url) as conn:
                report = maintain.run(conn, self.mp, self.sp, self.staging_dir, fp=self.fp).as_dict()
        except Exception as e:  # noqa: BLE001 - a failed run is logged and the next one tries again
            log.exception("maintenance failed")
            report = {"error": f"{type(e).__name__}: {e}"}
        else:
            (log.warning if report.get("warnings") else log.info)("maintenance: %s", summary(report))
        self.last = report
        return report

    def _loop(self) -> None:
        while not self._stop.wait(self.mp.interval_minutes * 60):
            self.run_once()


def summary(report: dict) -> str:
    """One line of counts for the log."""
    if report.get("skipped"):
        return f"skipped ({report['skipped']})"
    orphans = sum(report["orphans"].values())
    line = (
        f"{report['documents_deleted']} documents of gone files, {report['superseded_deleted']} superseded, "
        f"{report['chunks_deleted']} chunks, {orphans} orphan rows, {report['feedback_deleted']} feedback queries "
        f"({report['feedback_kept_unpulled']} old kept: not pulled), {report['staging_deleted']} staging files, "
        f"usage weights {report['usage'].get('changed', 0)} changed, vacuumed {report['vacuumed'] or '-'}, "
        f"{report['seconds']} s"
    )
    if report.get("index_check"):
        line += f", index check {report['index_check']}"
    return line + "".join(f"; warning: {w}" for w in report["warnings"])
