"""Reading files into documents (retrieval/corpus/sources.py), on real files: what a folder holds, a plain file as one
document, a JSONL corpus streamed one document per record with each bad record one error while the rest go on,
and what Postgres cannot store named."""

import json

import pytest

from retrieval.corpus.sources import InputError, discover, read_documents, text_problem


def test_discover_walks_folders_skipping_other_types_hidden_files_and_tool_folders(tmp_path):
    notes = tmp_path / "notes"
    for name, data in {
        "a.md": b"# A\n\nalpha\n",
        "b.py": b"def f():\n    return 1\n",
        "c.bin": b"\x00\x01",
        ".hidden.md": b"x",
        "node_modules/x.md": b"x",
        ".git/HEAD.md": b"x",
        "sub/d.txt": b"delta\n",
    }.items():
        (notes / name).parent.mkdir(parents=True, exist_ok=True)
        (notes / name).write_bytes(data)
    files, missing, skipped = discover([notes, tmp_path / "gone.md"])
    assert [f.relative_to(notes).as_posix() for f in files] == ["a.md", "b.py", "sub/d.txt"]
    assert missing == [tmp_path / "gone.md"] and skipped == 2  # c.bin and .hidden.md; the tool folders unwalked


def test_a_plain_file_is_one_document_and_a_binary_one_an_error(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nalpha\n")
    (doc,) = read_documents(tmp_path / "a.md", 100)
    assert (doc.source, doc.text, doc.kind) == (str(tmp_path / "a.md"), "# A\n\nalpha\n", "markdown")
    (tmp_path / "c.bin").write_bytes(b"\x00\x01")
    with pytest.raises(InputError, match="c.bin: binary file"):
        list(read_documents(tmp_path / "c.bin", 100))
    with pytest.raises(InputError, match="no such file or directory"):
        list(read_documents(tmp_path / "gone.md", 100))


def test_a_corpus_is_one_document_per_record_and_one_error_per_bad_record(tmp_path):
    corpus = tmp_path / "c.jsonl"
    lines = [
        json.dumps({"_id": "1", "text": "one", "title": "T"}),
        "",
        "{bad",
        json.dumps({"text": "no id"}),
        json.dumps({"_id": "1", "text": "the same id again"}),
        json.dumps({"_id": "2", "text": "x" * 200}),
        "[1]",
        json.dumps({"candidates": [{"id": "p1", "text": "para"}, {"id": "p2", "text": "two"}]}),  # a benchmark record
    ]
    corpus.write_text("\n".join(lines) + "\n")
    out = [(d.source.rsplit("#", 1)[1], d.text, d.title) if not isinstance(d, InputError) else str(d).split(": ", 1)[1]
           for d in read_documents(corpus, 100)]  # fmt: skip
    assert out == [
        ("1", "one", "T"),
        "invalid JSON (Expecting property name enclosed in double quotes)",
        "record needs an id (_id or id) and a text string",
        "record of 225 bytes is over the 100-byte cap",
        "record is not a JSON object",
        ("p1", "para", None),
        ("p2", "two", None),
    ]
    (tmp_path / "e.jsonl").write_text("")
    assert [str(e) for e in read_documents(tmp_path / "e.jsonl", 100)] == [
        f"{tmp_path / 'e.jsonl'}: empty file (no records)"
    ]


def test_what_postgres_cannot_store_is_named():
    assert text_problem("fine text") is None
    assert text_problem("a\x00b") == "contains a NUL character"
    assert text_problem("x\ud800") == "is not valid Unicode (lone surrogate at offset 1)"
