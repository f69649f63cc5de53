"""One bad file is one line, and the rest of the run goes on: NUL bytes past the binary sniff, NUL
and lone surrogates inside JSONL records, a symlink to itself, a line of megabytes, an id too long
to index, an empty corpus file. Real files, the real embedded Postgres and the real model."""

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from retrieval.corpus.ingest import ingest_paths
from retrieval.params import IngestParams, SearchParams

IP, SP = IngestParams(), SearchParams()


def hostile_folder(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "a_good.md").write_text("# Good\n\nThe good note about zqgoodmarker survives its neighbours.\n")
    (d / "late_nul.txt").write_bytes(b"plain text\n" * 1000 + b"then a \x00 byte\n")  # NUL past the first 8 KB
    (d / "records.jsonl").write_text(
        json.dumps({"_id": "ok", "text": "A fine record about zqrecordmarker."})
        + "\n"
        + '{"_id": "nul", "text": "a \\u0000 inside"}\n'
        + '{"_id": "surrogate", "text": "half a pair \\ud800 here"}\n'
        + json.dumps({"_id": "x" * 5000, "text": "an id too long for a b-tree"})
        + "\n"
        + json.dumps({"_id": "t", "title": "bad \u0000 title", "text": "text"})
        + "\n"
    )
    (d / "empty.jsonl").write_bytes(b"")
    os.symlink("self.md", d / "self.md")
    (d / "wide.txt").write_text(" ".join(f"w{i}" for i in range(400_000)) + " zqwidemarker\n")  # 2.4 MB, one line
    (d / "z_good.md").write_text("# Last\n\nThe last note about zqlastmarker is ingested too.\n")
    return d


# big chunks keep the megabyte line to ~30 chunks to embed (at 200 tokens it is ~3,900: minutes of CPU)
WIDE = IngestParams(chunk_tokens=20_000)


def test_each_bad_file_is_one_line_and_the_rest_goes_on(conn, embedder, tmp_path, invariant_breaks):
    d = hostile_folder(tmp_path)
    assert (d / "wide.txt").stat().st_size > 2_400_000
    report = ingest_paths(conn, [d], WIDE, SP, embedder)
    errors = "\n".join(report.errors)
    assert all("\n" not in e for e in report.errors)
    assert "late_nul.txt: NUL byte at offset 11,007" in errors
    assert "records.jsonl:2: record 'nul': text contains a NUL character" in errors
    assert "records.jsonl:3: record 'surrogate': text is not valid Unicode" in errors
    assert "records.jsonl:4: record id of 5,000 characters is over 300" in errors
    assert "records.jsonl:5: record 't': title contains a NUL character" in errors
    assert "empty.jsonl: empty file (no records)" in errors
    assert "self.md: cannot read" in errors
    assert len(report.errors) == 7, errors
    for word in ("zqgoodmarker", "zqrecordmarker", "zqwidemarker", "zqlastmarker"):
        (hits,) = conn.execute(
            "SELECT count(*) FROM chunk_terms WHERE tsv @@ plainto_tsquery('english', %s)", (word,)
        ).fetchone()
        assert hits == 1, word
    assert invariant_breaks(conn) == []
    (longest,) = conn.execute("SELECT max(length(text)) FROM chunks").fetchone()
    assert longest <= 4 * WIDE.chunk_tokens  # the megabyte line became chunk-sized pieces


def test_pai_ingest_fails_when_every_input_failed(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01")
    r = CliRunner().invoke(app, ["ingest", str(tmp_path / "empty.jsonl"), str(tmp_path / "blob.txt")])
    assert r.exit_code != 0
    assert "empty.jsonl: empty file (no records)" in r.output and "nothing ingested" in r.output
    assert "Traceback" not in r.output
    (tmp_path / "ok.md").write_text("# Ok\n\nfine\n")
    r = CliRunner().invoke(app, ["ingest", str(tmp_path)])
    assert r.exit_code == 0, r.output  # some inputs failed, not all
