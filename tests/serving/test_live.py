"""Inbox watching and the git hook, on real files, a real git and a real Postgres."""

import os
import subprocess
import sys
import threading
from pathlib import Path

from retrieval.params import IngestParams, SearchParams
from serving.live import install_hook, process_inbox_file, watch
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


def test_inbox_files_move_to_processed_or_failed(conn, embedder, tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    done = []

    def handle(p):
        done.append(process_inbox_file(conn, p, inbox, IngestParams(), SearchParams(), embedder))

    (inbox / "early.md").write_text("# Early\n\nThis note was there before the watcher started.\n")
    stop = threading.Event()
    t = threading.Thread(target=watch, args=(inbox, handle, stop), kwargs={"settle_s": 0.05})
    t.start()
    try:
        wait_for(lambda: done, 30)  # early.md handled: the watcher's observer started before it (serving.live.watch)
        (inbox / "late.md").write_text("# Late\n\nThis note arrived while watching.\n")
        (inbox / "blob.txt").write_bytes(b"\x00\x01\x02")
        wait_for(lambda: len(done) >= 3, 30)
    finally:
        stop.set()
        t.join()
    assert sorted(p.name for p in (inbox / "processed").iterdir()) == ["early.md", "late.md"]
    assert sorted(p.name for p in (inbox / "failed").iterdir()) == ["blob.txt", "errors.log"]
    log = (inbox / "failed" / "errors.log").read_text().splitlines()
    assert len(log) == 1 and log[0].endswith("blob.txt: " + str(inbox / "processed" / "blob.txt") + ": binary file")
    sources = sorted(Path(s).name for (s,) in conn.execute("SELECT source FROM documents"))
    assert sources == ["early.md", "late.md"]
    assert {Path(s).parent.name for (s,) in conn.execute("SELECT source FROM documents")} == {"processed"}


def test_post_commit_hook_ingests_what_a_commit_touches(db_url, tmp_path):
    repo = tmp_path / "notes"
    repo.mkdir()
    git = lambda *a: subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *a],  # noqa: E731
        check=True,
        capture_output=True,
    )
    git("init", "-q")
    install_hook(repo, REPO / "params.yaml", tmp_path / ".pai")
    (repo / "a.md").write_text("# A\n\nThe hook should ingest this note.\n")
    env = os.environ | {"DATABASE_URL": db_url, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "add", "a.md"], check=True, env=env
    )
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"], check=True, env=env
    )
    import psycopg

    with psycopg.connect(db_url) as c:
        try:
            rows = wait_for(lambda: c.execute("SELECT source FROM documents").fetchall(), 90, every=0.2)
        except AssertionError:  # the hook's log says why
            rows = []
    assert [Path(s).name for (s,) in rows] == ["a.md"], (repo / ".git" / "pai-ingest.log").read_text()


def test_a_hook_installed_without_params_reads_them_as_pai_would_by_hand(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    hook = install_hook(tmp_path / "repo", None, tmp_path / "home")
    text = hook.read_text()
    assert " ingest < " in text and "--params" not in text  # retrieval.params.params_files decides at commit time
    assert f'export PAI_HOME="${{PAI_HOME:-{tmp_path / "home"}}}"' in text
