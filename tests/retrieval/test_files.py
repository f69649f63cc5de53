"""Files the pipeline writes and trusts (retrieval/files.py): replaced atomically, and hashed by content (files in
the order given, folders by relative names and contents)."""

import hashlib

from retrieval.files import dir_sha256, files_sha256, write_atomic


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "metrics.json"
    write_atomic(path, "one\n")
    write_atomic(path, "two\n")
    assert path.read_text() == "two\n" and [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_files_hash_is_one_sha256_over_their_contents_in_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"alpha")
    b.write_bytes(b"beta")
    assert files_sha256(a, b) == hashlib.sha256(b"alphabeta").hexdigest() != files_sha256(b, a)


def test_a_folders_hash_follows_names_and_contents_not_its_place(tmp_path):
    for root in ("x", "y"):
        (tmp_path / root / "sub").mkdir(parents=True)
        (tmp_path / root / "adapter.npy").write_bytes(b"\x01\x02")
        (tmp_path / root / "sub" / "config.json").write_text("{}")
    x, y = tmp_path / "x", tmp_path / "y"
    assert dir_sha256(x) == dir_sha256(y)
    (y / "sub" / "config.json").write_text('{"k": 1}')
    assert dir_sha256(x) != dir_sha256(y)
    (y / "sub" / "config.json").write_text("{}")
    (y / "sub" / "config.json").rename(y / "sub" / "other.json")
    assert dir_sha256(x) != dir_sha256(y)
