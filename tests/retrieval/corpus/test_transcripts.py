"""Chat transcripts as sources (retrieval/corpus/transcripts.py): the generic JSONL and the assistant's transcript
read into one conversation, hostile lines as one error each, a half-written last line left for later, an appended
transcript re-ingested adding only its new turns; notes and corpora chunked exactly as before."""

import json
from pathlib import Path

from retrieval.chunking import chunk_document
from retrieval.corpus.ingest import chunks_of, ingest_paths
from retrieval.corpus.sources import Document, InputError, read_documents
from retrieval.corpus.transcripts import read_any
from retrieval.dialogue import parse_chat_log
from retrieval.params import IngestParams, SearchParams

IP, SP = IngestParams(), SearchParams()
REPO = Path(__file__).resolve().parents[3]


def line(session, time, speaker, text) -> str:
    return json.dumps({"session": session, "time": time, "speaker": speaker, "text": text}) + "\n"


def read(path: Path, max_bytes: int = IP.max_file_bytes) -> tuple[list[Document], list[str]]:
    out = list(read_any(path, max_bytes))
    return [d for d in out if isinstance(d, Document)], [str(e) for e in out if isinstance(e, InputError)]


def test_a_generic_transcript_is_one_dated_conversation(tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text(
        line(1, "2023-05-08T14:00:00", "Ann", "Did the build pass?")
        + line(
            1, "2023-05-08T13:56:00", "Bob", "Yes, after the cache fix."
        )  # out of order: the heading names the earliest
        + line(2, "2023-06-01 09:00", "Ann", "We moved the office to Lyon.")
    )
    (doc,), errors = read(f)
    assert errors == [] and doc.kind == "conversation" and doc.source == str(f.resolve())
    sessions = parse_chat_log(doc.text)
    assert [(s.label, s.when, [t.speaker for t in s.turns]) for s in sessions] == [
        ("session 1", "2023-05-08 13:56", ["Ann", "Bob"]),
        ("session 2", "2023-06-01 09:00", ["Ann"]),
    ]
    assert chunks_of(doc.text, doc.kind, IP)[0].text.startswith("[2023-05-08 13:56 · session 1 · Ann, Bob]\nAnn: Did")


def test_the_assistant_transcript_keeps_text_turns_only():
    (doc,), errors = read(REPO / "tests/data/claude_transcript.jsonl")
    assert len(errors) == 1 and "invalid JSON" in errors[0]  # the line "not json at all {"
    turns = [t for s in parse_chat_log(doc.text) for t in s.turns]
    assert [t.speaker for t in turns][:3] == ["user", "assistant", "user"]
    assert "Honey bees keep their honey in wax combs" in doc.text and "query_id" not in doc.text  # no tool results


def test_hostile_lines_are_one_error_each_and_the_rest_is_kept(tmp_path):
    f = tmp_path / "hostile.jsonl"
    with open(f, "w") as out:
        out.write(line("s", "2024-01-02 10:00", "Ann", "first turn about zqfirstmarker"))
        out.write(line("s", "2024-01-02 10:01", "Ann", "x" * 50_000_000))  # a 50 MB line
        out.write(line("s", "2024-01-02 10:02", "Bob", "a \u0000 NUL"))
        out.write(json.dumps({"session": "s", "speaker": {"name": "?"}, "text": "a speaker that is no name"}) + "\n")
        out.write(json.dumps({"session": "s", "text": "no speaker at all"}) + "\n")
        out.write(line("s", None, "Eve: x\n# y", "text with\n\n# a heading\n\nBob: a fake turn"))
        out.write(line("s", "2024-01-02 10:05", "Ann", ["not", "a", "string"]))
        out.write(line("s", "2024-01-02 10:06", "Bob", "last turn about zqlastmarker"))
    (doc,), errors = read(f)
    assert len(errors) == 3 and all(e.startswith(f"{f}:") and "\n" not in e for e in errors)
    assert ":2: line of 50,000,0" in errors[0] and ":3: turn contains a NUL" in errors[1] and ":7:" in errors[2]
    turns = parse_chat_log(doc.text)[0].turns
    assert [t.speaker for t in turns] == ["Ann", "unknown", "unknown", "Eve x y", "Bob"]
    assert turns[3].text == "text with\n\\# a heading\nBob: a fake turn"  # one turn: no heading, no turn made up
    assert "zqfirstmarker" in doc.text and "zqlastmarker" in doc.text


def test_a_one_megabyte_turn_is_chunked_in_pieces_that_each_say_when(tmp_path):
    f = tmp_path / "big.jsonl"
    f.write_text(
        line(1, "2024-03-04", "Ann", "word " * 200_000) + line(1, "2024-03-04", "Bob", "Too long; didn't read.")
    )
    (doc,), errors = read(f)
    chunks = chunks_of(doc.text, doc.kind, IP)
    assert errors == [] and len(chunks) > 100
    assert all(
        c.text.startswith("[2024-03-04 · session 1 · Ann") and c.tokens <= 2 * IP.chunk_tokens + 20 for c in chunks
    )


def test_a_half_written_last_line_waits_for_the_next_ingest(tmp_path, conn, embedder):
    f = tmp_path / "live.jsonl"
    turns = [
        line(1, "2024-05-01 10:00", "Ann" if i % 2 else "Bob", f"turn {i} about topic zq{i}marker, " * 6)
        for i in range(12)
    ]
    f.write_text("".join(turns) + turns[0][:25])  # the writer is mid-line
    first = ingest_paths(conn, [tmp_path], IP, SP, embedder)
    assert first.errors == [] and first.chunks_inserted > 2
    before = {r[0] for r in conn.execute("SELECT text FROM chunks")}
    more = [line(2, "2024-05-02 10:00", "Ann", f"new turn {i} about zqnew{i}marker, " * 6) for i in range(4)]
    f.write_text("".join(turns) + "".join(more))  # the half line finished as a new session's turns
    second = ingest_paths(conn, [tmp_path], IP, SP, embedder)
    after = {r[0] for r in conn.execute("SELECT text FROM chunks")}
    assert second.errors == [] and second.documents_updated == 1
    assert before <= after  # every earlier window kept as it was: only the new turns were added
    assert second.chunks_inserted == len(after - before) and all("zqnew" in t for t in after - before)
    assert all(f"zqnew{i}marker" in "".join(after) for i in range(4))
    late = [line(2, "2024-05-02 10:30", "Bob", f"late turn {i} about zqlate{i}marker, " * 6) for i in range(3)]
    f.write_text("".join(turns) + "".join(more) + "".join(late))  # the same session goes on
    third = ingest_paths(conn, [tmp_path], IP, SP, embedder)
    final = {r[0] for r in conn.execute("SELECT text FROM chunks")}
    assert third.errors == [] and len(after - final) <= 1  # at most the session's last window grows
    assert all(f"zqlate{i}marker" in "".join(final) for i in range(3))
    assert third.chunks_inserted == len(final - after) <= len(late) + 1


def test_notes_and_corpora_chunk_exactly_as_before(benchmark_dir):
    """Only conversations are chunked by turns: every markdown note here and SciFact's corpus are read and
    chunked as `sources.read_documents` and `chunking.chunk_document` did before conversations came."""
    files = [*REPO.glob("docs/*.md"), REPO / "README.md", REPO / "tests/data/secrets_corpus.jsonl"]
    scifact = benchmark_dir / "scifact" / "corpus.jsonl"
    files += [scifact] if scifact.exists() else []
    for f in files:
        new, old = list(read_any(f, IP.max_file_bytes)), list(read_documents(f, IP.max_file_bytes))
        assert [str(d) if isinstance(d, InputError) else d for d in new] == [
            str(d) if isinstance(d, InputError) else d for d in old
        ]
        for d in [d for d in new if isinstance(d, Document)][:300]:
            assert chunks_of(d.text, d.kind, IP, d.title) == chunk_document(d.text, d.kind, IP.chunk_tokens, d.title)
