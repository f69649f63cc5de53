"""Ingestion against the real embedded Postgres and the real MiniLM model."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from retrieval.corpus.ingest import ingest_documents, ingest_paths
from retrieval.corpus.sources import Document
from retrieval.db import DatabaseError, connect
from retrieval.params import IngestParams, SearchParams

IP, SP = IngestParams(), SearchParams()

GUIDE = """# Guide

## Install

Install with pip. The password = "hunter22" must never be stored.

## Usage

Run the command line tool with a query.
"""


def snapshot(conn):
    """Every row with its xmin: any write, even a no-op UPDATE, changes it."""
    docs = conn.execute("SELECT id, xmin::text, content_hash FROM documents ORDER BY id").fetchall()
    chunks = conn.execute(
        "SELECT id, xmin::text, source, start_line, end_line, text FROM chunks ORDER BY id"
    ).fetchall()
    return docs, chunks


def ingest(conn, embedder, *paths, params=IP):
    return ingest_paths(conn, [Path(p) for p in paths], params, SP, embedder)


def test_ingest_chunks_scrubs_and_stores(conn, embedder, tmp_path):
    (tmp_path / "guide.md").write_text(GUIDE)
    (tmp_path / "notes.txt").write_text("Boil the pasta for ten minutes in salted water.\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\x00\x00")
    r = ingest(conn, embedder, tmp_path)
    assert (r.files, r.documents_new, r.chunks_inserted, r.skipped_files, r.errors) == (2, 2, 3, 1, [])
    assert r.redactions == {"PASSWORD": 1}
    rows = conn.execute(
        "SELECT heading, parent_heading, level, start_line, end_line, text FROM chunks"
        " WHERE source LIKE '%guide.md' ORDER BY ord"
    ).fetchall()
    assert rows == [
        (
            "Install",
            "Guide",
            2,
            3,
            5,
            '## Install\n\nInstall with pip. The password = "[REDACTED:PASSWORD]" must never be stored.',
        ),
        ("Usage", "Guide", 2, 7, 9, "## Usage\n\nRun the command line tool with a query."),
    ]
    assert "hunter22" not in str(conn.execute("SELECT array_agg(text) FROM chunks").fetchone())


def test_unchanged_reingest_writes_nothing(conn, embedder, tmp_path):
    (tmp_path / "guide.md").write_text(GUIDE)
    ingest(conn, embedder, tmp_path)
    before = snapshot(conn)
    r = ingest(conn, embedder, tmp_path)
    assert (r.documents_unchanged, r.documents_updated, r.chunks_inserted, r.chunks_deleted) == (1, 0, 0, 0)
    assert snapshot(conn) == before


def test_changed_file_replaces_only_changed_chunks(conn, embedder, tmp_path):
    f = tmp_path / "guide.md"
    f.write_text(GUIDE)
    ingest(conn, embedder, f)
    f.write_text(
        GUIDE.replace("Install with pip.", "Install with pipx, then restart your shell.") + "\nTrailing line.\n"
    )
    r = ingest(conn, embedder, f)
    assert (r.documents_updated, r.chunks_inserted, r.chunks_kept, r.chunks_deleted) == (1, 2, 0, 2)
    rows = conn.execute("SELECT id, heading, text FROM chunks ORDER BY ord").fetchall()
    assert [h for _, h, _ in rows] == ["Install", "Usage"]
    assert "pipx" in rows[0][2] and "Trailing line." in rows[1][2]
    assert conn.execute("SELECT n_chunks FROM documents").fetchone() == (2,)
    # the old Install chunk is gone, not kept beside the new one
    assert conn.execute("SELECT count(*) FROM chunks WHERE text LIKE '%%Install with pip.%%'").fetchone() == (0,)


def test_unchanged_chunk_keeps_its_id_when_another_changes(conn, embedder, tmp_path):
    f = tmp_path / "guide.md"
    f.write_text(GUIDE)
    ingest(conn, embedder, f)
    (usage_id,) = conn.execute("SELECT id FROM chunks WHERE heading = 'Usage'").fetchone()
    f.write_text(GUIDE.replace("Install with pip.", "Install with pipx instead."))
    r = ingest(conn, embedder, f)
    assert (r.chunks_inserted, r.chunks_kept, r.chunks_deleted) == (1, 1, 1)
    assert conn.execute("SELECT id FROM chunks WHERE heading = 'Usage'").fetchone() == (usage_id,)


def test_deleted_files_lose_their_chunks(conn, embedder, tmp_path):
    (tmp_path / "a.txt").write_text("Alpha document about rivers and lakes.\n")
    (tmp_path / "b.txt").write_text("Beta document about compilers and parsers.\n")
    ingest(conn, embedder, tmp_path)
    (tmp_path / "a.txt").unlink()
    r = ingest(conn, embedder, tmp_path)  # walking the folder notices a.txt is gone
    assert (r.documents_deleted, r.chunks_deleted, r.documents_unchanged) == (1, 1, 1)
    (tmp_path / "b.txt").unlink()
    r = ingest(conn, embedder, tmp_path / "b.txt")  # naming a known file that is gone removes it
    assert (r.documents_deleted, r.errors) == (1, [])
    assert conn.execute("SELECT count(*) FROM chunks").fetchone() == (0,)


def test_only_exact_duplicates_are_skipped_and_near_chunks_linked(conn, embedder, tmp_path):
    (tmp_path / "a.txt").write_text(
        "The cat sat on the warm windowsill all afternoon.\n\nBoil the pasta for ten minutes in salted water.\n"
    )
    ingest(conn, embedder, tmp_path / "a.txt", params=replace(IP, chunk_tokens=16))
    (tmp_path / "b.txt").write_text(
        "All afternoon the cat sat on the warm windowsill.\n\n"  # cos 0.95: near, kept
        "Cook pasta in boiling salted water for about ten minutes.\n\n"  # cos 0.91: near, kept
        "the cat  sat on the warm windowsill ALL afternoon.\n"  # the same text, whitespace and case aside: skipped
    )
    r = ingest(conn, embedder, tmp_path / "b.txt", params=replace(IP, chunk_tokens=16))
    assert (r.duplicates_skipped, r.near_linked, r.chunks_inserted) == (1, 2, 2)
    rows = conn.execute("""SELECT c.text, n.text, round(c.near_score::numeric, 2) FROM chunks c
                           JOIN chunks n ON n.id = c.near_chunk_id ORDER BY c.ord""").fetchall()
    assert [(a[:9], b[:9]) for a, b, _ in rows] == [("All after", "The cat s"), ("Cook past", "Boil the ")]
    assert 0.92 <= rows[0][2] < 1 and 0.75 <= rows[1][2] < 0.92


def test_bad_inputs_are_one_line_each_and_the_rest_goes_on(conn, embedder, tmp_path):
    (tmp_path / "ok.md").write_text("# Fine\n\nA perfectly good note.\n")
    (tmp_path / "empty.md").write_text("  \n\n")
    (tmp_path / "binary.txt").write_bytes(b"abc\x00\x01\x02")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (tmp_path / "big.txt").write_text("x" * 5000)
    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"_id": "1", "title": "One", "text": "First record text."})
        + "\n{not json\n"
        + json.dumps({"_id": "2"})
        + "\n"
        + json.dumps({"id": "3", "text": "Third record text."})
        + "\n"
    )
    r = ingest(conn, embedder, tmp_path, tmp_path / "missing.md", params=replace(IP, max_file_bytes=4000))
    errors = sorted(e.replace(str(tmp_path) + "/", "") for e in r.errors)
    assert errors == [
        "big.txt: 5,000 bytes is over the 4,000-byte cap (ingest.max_file_bytes)",
        "binary.txt: binary file",
        "corpus.jsonl:2: invalid JSON (Expecting property name enclosed in double quotes)",
        "corpus.jsonl:3: record needs an id (_id or id) and a text string",
        "empty.md: empty file",
        "latin1.txt: not UTF-8 text (bad byte at offset 3)",
        "missing.md: no such file or directory",
    ]
    assert all("\n" not in e for e in r.errors)
    sources = sorted(s.rsplit("/", 1)[1] for (s,) in conn.execute("SELECT source FROM documents"))
    assert sources == ["corpus.jsonl#1", "corpus.jsonl#3", "ok.md"]


def test_corpus_records_removed_from_a_jsonl_go(conn, embedder, tmp_path):
    f = tmp_path / "c.jsonl"
    recs = [
        {"_id": str(i), "text": t}
        for i, t in enumerate(["Rivers flow to the sea.", "Compilers parse code.", "Bees make honey."])
    ]
    f.write_text("\n".join(json.dumps(r) for r in recs))
    assert ingest(conn, embedder, f).documents_new == 3
    f.write_text("\n".join(json.dumps(r) for r in recs[:2]))
    r = ingest(conn, embedder, f)
    assert (r.documents_unchanged, r.documents_deleted) == (2, 1)


def test_database_down_is_one_clear_error():
    with pytest.raises(DatabaseError) as e:
        connect("postgresql://postgres:pw@127.0.0.1:1/nowhere")
    assert "database unavailable" in str(e.value) and "pw" not in str(e.value) and "\n" not in str(e.value)


def test_a_corrupted_corpus_file_loses_nothing(conn, embedder, tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"_id": "1", "text": "Rivers flow to the sea."}) + "\n")
    ingest(conn, embedder, f)
    f.write_text("{truncated\n")
    r = ingest(conn, embedder, f)
    assert (r.documents_deleted, len(r.errors)) == (0, 1)
    assert conn.execute("SELECT count(*) FROM chunks").fetchone() == (1,)


def test_one_batch_dedups_and_links_across_its_own_documents(conn, embedder, tmp_path):
    """The same two files as above, written in one batch (one transaction): dedup compares each document with the
    chunks kept for the batch's earlier ones too, and a near link to a chunk written in the same batch is resolved."""
    (tmp_path / "a.txt").write_text(
        "The cat sat on the warm windowsill all afternoon.\n\nBoil the pasta for ten minutes in salted water.\n"
    )
    (tmp_path / "b.txt").write_text(
        "All afternoon the cat sat on the warm windowsill.\n\nCook pasta in boiling salted water for about ten minutes."
        "\n\nthe cat  sat on the warm windowsill ALL afternoon.\n"
    )
    r = ingest(conn, embedder, tmp_path, params=replace(IP, chunk_tokens=16))
    assert (r.documents_new, r.duplicates_skipped, r.near_linked, r.chunks_inserted) == (2, 1, 2, 4)
    rows = conn.execute("""SELECT c.text, n.text FROM chunks c JOIN chunks n ON n.id = c.near_chunk_id
                           ORDER BY c.ord""").fetchall()
    assert [(a[:9], b[:9]) for a, b in rows] == [("All after", "The cat s"), ("Cook past", "Boil the ")]


def test_a_document_the_database_refuses_costs_only_itself(conn, embedder):
    """A document whose source is too long for its index (readers refuse such ids; this one comes straight to
    `ingest_documents`) fails its batch's transaction; the batch is written again one document at a time, so only
    that document is lost, with one line."""
    import random
    import string

    rng = random.Random(0)
    huge = "".join(rng.choice(string.ascii_letters) for _ in range(12_000))  # incompressible: over btree's limit
    docs = [Document(f"note:{i}", "", f"Note number {i} is about topic {i}.", "text") for i in range(5)]
    docs.insert(2, Document(huge, "", "A note with an enormous source.", "text"))
    r = ingest_documents(conn, docs, IP, SP, embedder)
    assert r.documents_new == 5 and len(r.errors) == 1 and "not stored" in r.errors[0]
    assert "\n" not in r.errors[0] and len(r.errors[0]) < 12_000
    assert conn.execute("SELECT count(*) FROM documents").fetchone() == (5,)
