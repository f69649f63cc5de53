"""The service's capture worker: one background thread takes posted exchanges through the gates
(retrieval/conversation/capture.py), in the order they came. Exchanges left pending by a stop or a crash are
taken up again at start; one that raises is marked failed with a one-line reason, never retried in a loop."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from psycopg_pool import ConnectionPool

from retrieval.conversation import capture, intake
from retrieval.conversation.capture import CaptureParams, Extractor
from retrieval.embed import Embedder
from retrieval.params import IngestParams, SearchParams

log = logging.getLogger("pai.capture")


class CaptureWorker:
    def __init__(
        self,
        pool: ConnectionPool,
        params: CaptureParams,
        ingest: IngestParams,
        search: SearchParams,
        embedder: Embedder,
        extractor: Extractor | None,
    ):
        self.pool, self.params, self.ingest, self.search = pool, params, ingest, search
        self.embedder, self.extractor = embedder, extractor
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="capture")

    def resume(self) -> int:
        """Queue every exchange still pending in the database; how many."""
        with self.pool.connection() as conn:
            ids = intake.pending_ids(conn)
        for i in ids:
            self.submit(i)
        return len(ids)

    def submit(self, capture_id: int) -> None:
        self.executor.submit(self._run, capture_id)

    def stop(self) -> None:
        """Finish the exchange in hand; the queued ones stay pending for the next start."""
        self.executor.shutdown(wait=True, cancel_futures=True)

    def _run(self, capture_id: int) -> None:
        try:
            with self.pool.connection() as conn:
                capture.process(conn, capture_id, self.params, self.ingest, self.search, self.embedder, self.extractor)
        except Exception as e:  # noqa: BLE001 - one exchange fails, the worker goes on
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            log.warning("capture %s failed: %s", capture_id, why)
            try:
                with self.pool.connection() as conn:
                    capture.fail(conn, capture_id, f"{type(e).__name__}: {why}")
            except Exception:  # noqa: BLE001 - the database is gone: it stays pending, resumed at start
                log.exception("capture %s: could not record the failure", capture_id)
