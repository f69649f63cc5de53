"""Concurrent ingests of the same files (two `pai ingest`, the watcher, the hook, the webhook): no
chunk may be lost. Before the per-source lock, the later writer skipped every chunk as a "duplicate"
of the earlier writer's rows of the very same document, and the document ended with no chunks."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams

REPO = Path(__file__).resolve().parents[3]
TOPICS = [
    "bees",
    "rivers",
    "compilers",
    "glaciers",
    "violins",
    "lichens",
    "tides",
    "kilns",
    "comets",
    "ferns",
    "owls",
    "quarries",
]


def write_notes(folder: Path, version: str = "") -> None:
    folder.mkdir(exist_ok=True)
    for t in TOPICS:
        (folder / f"{t}.md").write_text(
            f"# {t.title()}\n\nNotes about {t}{version}: zq{t}marker is the word to search for.\n\n"
            f"## More\n\nA second section on {t}, with its own paragraph of detail.\n"
        )


def check(conn, invariant_breaks):
    assert invariant_breaks(conn) == []
    n = dict(conn.execute("SELECT source, n_chunks FROM documents").fetchall())
    assert len(n) == len(TOPICS) and all(v == 2 for v in n.values()), n
    for t in TOPICS:  # every file is searchable by its own word
        (hits,) = conn.execute(
            "SELECT count(*) FROM chunk_terms WHERE tsv @@ plainto_tsquery('english', %s)", (f"zq{t}marker",)
        ).fetchone()
        assert hits == 1, t


def test_two_pai_ingest_processes_on_one_folder(db_url, embedder, tmp_path, invariant_breaks):
    notes = tmp_path / "notes"
    write_notes(notes)
    env = {**os.environ, "DATABASE_URL": db_url}
    pai = Path(sys.executable).with_name("pai")
    procs = [
        subprocess.Popen(
            [str(pai), "ingest", str(notes), "--json", "--params", str(REPO / "params.yaml")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        reports.append(json.loads(out[out.index("{") :]))
    # between them, each document written once or found unchanged; none lost
    assert sum(r["documents_new"] + r["documents_updated"] for r in reports) >= len(TOPICS)
    with connect(db_url) as conn:
        check(conn, invariant_breaks)
        again = ingest_paths(conn, [notes], IngestParams(), SearchParams(), embedder)
        assert again.documents_unchanged == len(TOPICS)
        check(conn, invariant_breaks)


def test_concurrent_writers_in_threads_lose_nothing(db_url, embedder, tmp_path, invariant_breaks):
    """Deterministic twin of the process test: both writers read the state before either writes."""
    notes = tmp_path / "notes"
    for version in ("", " (edited)", " (edited twice)"):  # new, then updated documents
        write_notes(notes, version)
        start = threading.Barrier(3)
        errors = []

        def run(start=start, errors=errors):
            try:
                with connect(db_url) as c:
                    start.wait()
                    ingest_paths(c, [notes], IngestParams(), SearchParams(), embedder)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with connect(db_url) as conn:
            check(conn, invariant_breaks)
