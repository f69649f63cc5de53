"""The secret corpus (tests/data/secrets_corpus.jsonl: 50+ synthetic forms in prose, YAML, .env, JSON,
shell, code, URLs, PEM and fenced blocks) is redacted 100 % by the scrubber and at every entry
point that stores text: files, JSONL records (text, title, id), the watcher, `pai ingest` (what the
git hook runs), query logging and staging files, feedback answers and corrections, and the
training export. The false-positive side is measured on real prose and code by `pai lab bench scrub` (eval.bench.scrub,
tests/eval/bench/test_scrub.py)."""

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.logs import feedback
from retrieval.params import IngestParams, SearchParams
from retrieval.query import staging
from retrieval.query.search import search
from retrieval.scrub import scrub
from serving.live import process_inbox_file
from training.pull import to_record

REPO = Path(__file__).resolve().parents[2]
CORPUS = [json.loads(line) for line in open(REPO / "tests" / "data" / "secrets_corpus.jsonl")]
SECRETS = [s for e in CORPUS for s in e["secrets"]]
SUFFIX = {
    "prose": ".md",
    "yaml": ".yaml",
    ".env": ".txt",
    "json": ".txt",
    "shell": ".sh",
    "code": ".py",
    "url": ".txt",
    "pem": ".txt",
    "fenced": ".md",
    "xml": ".txt",
    "ini": ".ini",
    "connstring": ".txt",
    "http": ".txt",
    "ssh": ".txt",
    "provider": ".md",
    "makefile": ".txt",
    "php": ".txt",
    "java": ".txt",
}
IP, SP = IngestParams(), SearchParams()


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_corpus_is_big_and_varied():
    assert len(CORPUS) >= 40 and {e["form"] for e in CORPUS} >= {
        "prose",
        "yaml",
        ".env",
        "json",
        "shell",
        "code",
        "url",
        "pem",
        "fenced",
    }


@pytest.mark.parametrize("entry", CORPUS, ids=[f"{e['id']}-{e['form']}" for e in CORPUS])
def test_scrub_redacts_every_form(entry):
    r = scrub(entry["text"])
    assert leaks(r.text) == [] and r.counts
    assert r.text.count("\n") == entry["text"].count("\n")
    assert scrub(r.text).text == r.text  # stable


def corpus_files(folder: Path) -> Path:
    folder.mkdir()
    for e in CORPUS:
        (folder / f"{e['id']}{SUFFIX[e['form']]}").write_text(e["text"] + "\n")
    with open(folder / "records.jsonl", "w") as f:  # secrets in a record's text, title and id
        for e in CORPUS:
            first = e["text"].split("\n")[0]
            f.write(json.dumps({"_id": f"r-{e['id']}-{first[:120]}", "title": first[:200], "text": e["text"]}) + "\n")
    return folder


def test_files_and_jsonl_records_store_no_secret(conn, embedder, tmp_path, all_text):
    report = ingest_paths(conn, [corpus_files(tmp_path / "notes")], IP, SP, embedder)
    assert report.errors == [] and report.documents_new == len(CORPUS) * 2
    assert leaks(all_text(conn)) == []


def test_watcher_stores_no_secret(conn, embedder, tmp_path, all_text):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for e in CORPUS[:20]:
        p = inbox / f"{e['id']}.md"
        p.write_text(e["text"])
        where, report, error = process_inbox_file(conn, p, inbox, IP, SP, embedder)
        assert error is None
    assert leaks(all_text(conn)) == []


def test_pai_ingest_as_the_git_hook_runs_it_stores_no_secret(db_url, tmp_path, all_text):
    notes = corpus_files(tmp_path / "repo")
    pai = Path(sys.executable).with_name("pai")
    r = subprocess.run(
        [str(pai), "ingest", str(notes), "--params", str(REPO / "params.yaml")],
        cwd=tmp_path,
        env={**os.environ, "DATABASE_URL": db_url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert leaks(r.stdout + r.stderr) == []
    with connect(db_url) as conn:
        assert leaks(all_text(conn)) == []


def test_query_log_staging_feedback_and_export_hold_no_secret(conn, embedder, tmp_path, all_text):
    (tmp_path / "n.md").write_text("# Deploys\n\nHow deploys work: push, build, ship.\n")
    ingest_paths(conn, [tmp_path / "n.md"], IP, SP, embedder)
    for e in CORPUS:
        result = search(conn, embedder, f"how do I use this? {e['text']}", SP)
        path = staging.write(staging.from_result(result), tmp_path / "st")
        assert leaks(path.read_text()) == [], e["id"]
        qid = feedback.log_query(conn, result.query, result.candidates, "first-stage")
        feedback.record_feedback(conn, qid, answer=f"Answer: {e['text']} [1]", rating=1)
        feedback.record_feedback(conn, qid, correction=f"Better: {e['text']}")
    stored = all_text(conn)
    assert leaks(stored) == [] and "[REDACTED:" in stored
    assert leaks(json.dumps(feedback.learned_answers(conn, "how do I use this?", limit=100))) == []


def test_training_export_scrubs_rows_stored_before_the_scrubber_knew(all_text):
    """The export scrubs again on the way out: rows written by an older scrubber (raw here)."""
    now = datetime.now(UTC)
    for e in CORPUS:
        cand = {
            "rank": 1,
            "chunk_id": 1,
            "content_hash": "h",
            "score": 0.5,
            "source": f"notes/{e['text'][:80]}",
            "heading": e["text"][:200],
            "text": e["text"],
            "pick_rank": 1,
            "used": True,
        }
        row = (1, e["text"], now, now, "first-stage", None, "p/1", "ok", 0.2, 1, e["text"], e["text"], [cand])
        rec = to_record(row, Counter())
        assert leaks(json.dumps(rec)) == [], e["id"]
