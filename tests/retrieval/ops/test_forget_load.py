"""Forget under load and across a crash, on a real Postgres and real files: a forget while other connections ingest
and query loses nothing else and leaves no half-deleted document; a process killed in the middle of the files' part
leaves an open journal row that the next forget finishes."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.db import connect
from retrieval.logs.feedback import log_query
from retrieval.ops import forget_files
from retrieval.ops.forget import Target, forget, resume
from retrieval.params import IngestParams
from retrieval.query import staging
from retrieval.query.search import search
from tests.forget_world import MARKER, SP, make_world

REPO = Path(__file__).resolve().parents[3]


def test_forget_during_ingest_and_queries_loses_nothing_else(
    conn, db_url, embedder, tmp_path, monkeypatch, invariant_breaks
):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    w = make_world(conn, db_url, embedder, tmp_path)
    places = forget_files.places(w.fp, w.staging, home=w.home)
    stop, errors, logged = threading.Event(), [], []

    def ingesting():
        with connect(db_url) as c:
            for i in range(12):
                text = f"# Load {i}\n\nLoad note {i} tells of the lantern number {i * 7} in the east hall.\n"
                ingest_documents(
                    c, [Document(f"note:load-{i}", "webhook:", text, "markdown")], IngestParams(), SP, embedder
                )

    def querying():
        with connect(db_url) as c:
            while not stop.is_set():
                r = search(c, embedder, "garden shed padlock code and the lanterns", SP)
                path = staging.write(staging.from_result(r, context=[1, 2]), w.staging)
                logged.append(log_query(c, r.query, r.above, "first-stage", shown=[1, 2], staging_path=str(path)))

    def guarded(f):
        def run():
            try:
                f()
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        return run

    threads = [threading.Thread(target=guarded(f)) for f in (ingesting, querying, querying)]
    for t in threads:
        t.start()
    report = forget(conn, Target(source="note:marker"), places, mark=None)
    threads[0].join()
    stop.set()
    for t in threads[1:]:
        t.join()
    assert not errors, errors
    assert report.documents == 1 and logged
    assert invariant_breaks(conn) == []  # every document whole: n_chunks, chunk rows and full-text rows agree
    sources = {s for (s,) in conn.execute("SELECT source FROM documents")}
    assert sources == {"note:bees", "note:rivers", "note:stars"} | {f"note:load-{i}" for i in range(12)}
    assert conn.execute("SELECT count(*) FROM queries").fetchone()[0] == 4 + len(logged)  # every query kept
    # a query whose search read the note before the forget committed and logged after it: the next resume sweeps it
    resume(conn, places, mark=None)
    assert forget_files.verify(conn, MARKER, places) == []


CRASH = """
import os, sys
from retrieval.db import connect
from retrieval.ops import forget_files
from retrieval.ops.forget import Target, forget
from retrieval.params import ForgetParams
from pathlib import Path
fp = ForgetParams(pipeline=sys.argv[2], dvc_cache=sys.argv[3])
places = forget_files.places(fp, Path(sys.argv[4]), home=Path(sys.argv[5]))
def die(name):
    if name == "DVC cache":
        os.kill(os.getpid(), 9)  # killed in the middle of the files: staging and the pipeline done, the rest not
with connect(sys.argv[1]) as conn:
    forget(conn, Target(source="note:marker"), places, mark=None, progress=die)
"""


def test_a_forget_killed_in_the_files_is_finished_by_the_next(conn, db_url, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    w = make_world(conn, db_url, embedder, tmp_path)
    places = forget_files.places(w.fp, w.staging, home=w.home)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [db_url, w.fp.pipeline, w.fp.dvc_cache, str(w.staging), str(w.home)]
    p = subprocess.run([sys.executable, "-c", CRASH, *args], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr
    left = {t.place for t in forget_files.verify(conn, MARKER, places)}
    assert left == {"DVC cache", "MLflow artifacts"}  # the database's part and the first files were done
    assert conn.execute("SELECT count(*) FROM forget_journal WHERE state = 'files'").fetchone() == (1,)

    forget(conn, Target(source="note:bees"), places, mark=None)  # the next forget finishes it first
    assert forget_files.verify(conn, MARKER, places) == []
    assert conn.execute("SELECT count(*) FROM forget_journal WHERE state = 'files'").fetchone() == (0,)
