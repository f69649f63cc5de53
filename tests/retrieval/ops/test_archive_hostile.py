"""Hostile archives on import: a foreign file, a truncated or corrupt one, a manifest whose checksums do not match,
a member outside the folder (`../x`, an absolute path, a link), a member larger than its manifest says, an archive
of another format version or of a newer schema. Each is one line, and the target store is left as it was."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from retrieval.ops.archive import export_store, import_store
from retrieval.ops.archive_format import ArchiveError

DOC = "INSERT INTO documents (source, path, content_hash, n_chunks) VALUES ('a.md', 'a.md', 'h', 0)"


@pytest.fixture
def good(conn, tmp_path) -> tuple[Path, dict]:
    """A real archive of a store with one document."""
    conn.execute(DOC)
    path = tmp_path / "good.tgz"
    return path, export_store(conn, path, "test")


def members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path, "r:gz") as tar:
        return [(m, tar.extractfile(m).read() if m.isreg() else b"") for m in tar.getmembers()]


def write(path: Path, items: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in items:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def with_manifest(items, change) -> list:
    manifest = json.loads(items[0][1])
    change(manifest)
    return [(items[0][0], json.dumps(manifest).encode())] + items[1:]


def refused(target, archive: Path, tmp_path: Path, match: str) -> str:
    """Import `archive` into the store of `target`: one line matching `match`, and nothing written."""
    before = target.execute("SELECT count(*) FROM documents").fetchone()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    with pytest.raises(ArchiveError, match=match) as e:
        import_store(target, archive, work)
    assert "\n" not in str(e.value)
    assert target.execute("SELECT count(*) FROM documents").fetchone() == before
    assert target.execute("SELECT count(*) FROM store_imports").fetchone() == (0,)
    return str(e.value)


@pytest.fixture
def target(conn):
    """The store the hostile archives are imported into: emptied after `good` was made from it."""
    return conn


def empty(conn):
    conn.execute("DELETE FROM documents")


def test_foreign_files_are_refused(good, target, tmp_path):
    empty(target)
    for name, data in {
        "empty": b"",
        "text.txt": b"hello\x00world\n" * 100,
        "plain.gz": gzip.compress(b"not a tar at all" * 1000),
    }.items():
        refused(target, _bytes(tmp_path / name, data), tmp_path, "not a pai archive")
    other = [(tarfile.TarInfo("README"), b"someone else's tar")]
    refused(target, write(tmp_path / "other.tgz", other), tmp_path, "first member is not manifest.json")
    not_ours = [(tarfile.TarInfo("manifest.json"), json.dumps({"format": "docker"}).encode())]
    refused(target, write(tmp_path / "docker.tgz", not_ours), tmp_path, "format is not 'pai-archive'")
    refused(target, write(tmp_path / "bad.tgz", [(tarfile.TarInfo("manifest.json"), b"{nope")]), tmp_path, "JSON")
    refused(target, tmp_path / "missing.tgz", tmp_path, "no such file")
    refused(target, tmp_path, tmp_path, "directory")


def test_truncated_and_corrupt_archives_are_refused(good, target, tmp_path):
    path, _ = good
    empty(target)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 30):
        refused(target, _bytes(tmp_path / f"cut{cut}.tgz", data[:cut]), tmp_path, "truncated|corrupt")
    items = members(path)
    # a table's bytes changed, its manifest not: the checksum catches it
    flipped = [(i, d.replace(b"a.md", b"b.md") if i.name == "tables/documents.tsv" else d) for i, d in items]
    refused(target, write(tmp_path / "flip.tgz", flipped), tmp_path, "does not match its manifest's sha256")
    # a member dropped
    refused(
        target,
        write(tmp_path / "drop.tgz", [x for x in items if x[0].name != "tables/chunks.tsv"]),
        tmp_path,
        "missing",
    )


def test_members_outside_the_folder_or_larger_than_said_are_refused(good, target, tmp_path):
    path, _ = good
    empty(target)
    items = members(path)
    evil = b"pwned"
    for name in ("../x", "tables/../../x", "/etc/x", "files/a\\..\\..\\x", "x"):
        sneaky = with_manifest(
            items,
            lambda m, n=name: m["files"].append({"name": n, "bytes": 5, "sha256": hashlib.sha256(evil).hexdigest()}),
        ) + [(tarfile.TarInfo(name), evil)]
        refused(target, write(tmp_path / "evil.tgz", sneaky), tmp_path, "unsafe member name")
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()
    # a member the manifest does not name
    refused(
        target,
        write(tmp_path / "extra.tgz", items + [(tarfile.TarInfo("files/extra"), evil)]),
        tmp_path,
        "not in its manifest",
    )
    # a link where the manifest names a file
    link = tarfile.TarInfo("files/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    linked = with_manifest(items, lambda m: m["files"].append({"name": "files/link", "bytes": 0, "sha256": "0"}))
    refused(target, write(tmp_path / "link.tgz", linked + [(link, b"")]), tmp_path, "not a plain file")
    # a member larger than its manifest says, and a manifest claiming more than the disk holds
    big = b"\n" * 100_000
    bigger = with_manifest(items, lambda m: m["files"].append({"name": "files/big", "bytes": 10, "sha256": "0"}))
    refused(
        target,
        write(tmp_path / "big.tgz", bigger + [(tarfile.TarInfo("files/big"), big)]),
        tmp_path,
        "manifest says 10",
    )
    huge = with_manifest(items, lambda m: m["files"].append({"name": "files/big", "bytes": 1 << 60, "sha256": "0"}))
    refused(target, write(tmp_path / "huge.tgz", huge + [(tarfile.TarInfo("files/big"), big)]), tmp_path, "free")
    assert not list((tmp_path / "work").rglob("big"))


def test_other_versions_and_schemas_say_why_in_one_line(good, target, tmp_path):
    path, _ = good
    empty(target)
    items = members(path)
    for v in (0, 2, "1"):
        line = refused(
            target,
            write(tmp_path / "v.tgz", with_manifest(items, lambda m, v=v: m.update(format_version=v))),
            tmp_path,
            "format version",
        )
        assert repr(v) in line
    newer = with_manifest(items, lambda m: m.update(schema_version=m["schema_version"] + 1))
    refused(target, write(tmp_path / "newer.tgz", newer), tmp_path, "schema is version")
    alien = with_manifest(items, lambda m: m["tables"]["documents"]["columns"].append("mood"))
    refused(target, write(tmp_path / "alien.tgz", alien), tmp_path, "column.*mood")
    wrong_type = with_manifest(items, lambda m: m.update(tables=[1, 2]))
    refused(target, write(tmp_path / "type.tgz", wrong_type), tmp_path, "malformed")


def test_a_full_store_is_refused_and_a_bad_row_writes_nothing(good, target, tmp_path):
    path, _ = good
    refused(target, path, tmp_path, "not empty")
    empty(target)
    # rows the store refuses (a value of the wrong type), the manifest consistent with them: the transaction rolls back
    items = members(path)
    bad = [(i, d.replace(b"\t0\t", b"\tzero\t", 1) if i.name == "tables/documents.tsv" else d) for i, d in items]
    fixed = dict((i.name, (len(d), hashlib.sha256(d).hexdigest())) for i, d in bad if i.name.startswith("tables/"))
    bad = with_manifest(
        bad,
        lambda m: [
            m["tables"][t].update(bytes=fixed[f"tables/{t}.tsv"][0], sha256=fixed[f"tables/{t}.tsv"][1])
            for t in m["tables"]
        ],
    )
    refused(target, write(tmp_path / "rows.tgz", bad), tmp_path, "nothing was written")


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_an_archive_of_an_older_schema_loads_by_column_name(good, target, tmp_path):
    """As if made before migration 014 (no written_at): its documents load, the column takes the target's default."""
    path, manifest = good
    empty(target)
    items = members(path)
    at = manifest["tables"]["documents"]["columns"].index("written_at")
    old = []
    for info, data in items:
        if info.name == "tables/documents.tsv":
            data = b"".join(
                b"\t".join(f for i, f in enumerate(line.split(b"\t")) if i != at) + b"\n" for line in data.splitlines()
            )
            spec = (len(data), hashlib.sha256(data).hexdigest())
        old.append((info, data))

    def older(m):
        m["schema_version"] = 13
        m["tables"]["documents"]["columns"].remove("written_at")
        m["tables"]["documents"].update(bytes=spec[0], sha256=spec[1])

    work = tmp_path / "work"
    work.mkdir()
    import_store(target, write(tmp_path / "old.tgz", with_manifest(old, older)), work)
    assert target.execute("SELECT source, written_at IS NOT NULL FROM documents").fetchall() == [("a.md", True)]
