"""The judged benchmark sets the repository ships (eval/judged_sets.py): unpacked, byte for byte what SHA256SUMS
names; unpacking writes only what is missing; every committed .xz is in the manifest and nothing else is."""

import shutil

from eval.judged_sets import JUDGED, MANIFEST, mismatches, unpack


def manifest_names() -> list[str]:
    return [line.split("  ", 1)[1] for line in (JUDGED / MANIFEST).read_text().splitlines()]


def test_the_unpacked_sets_match_the_manifest(benchmark_dir):
    assert benchmark_dir == JUDGED and mismatches(benchmark_dir) == []
    packed = {str(p.relative_to(JUDGED).with_suffix("")) for p in JUDGED.rglob("*.xz")}
    assert set(manifest_names()) == packed | {"locomo/README.md"}  # the licence note is committed as it is


def test_the_manifest_is_the_shared_copy(tmp_path, shared_benchmark):
    """Where the team's copy is at hand: the shipped files are its files, unchanged."""
    (tmp_path / MANIFEST).write_text((JUDGED / MANIFEST).read_text())
    for name in manifest_names():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).symlink_to(shared_benchmark(name))
    assert mismatches(tmp_path) == []


def test_unpack_writes_only_what_is_missing(tmp_path):
    committed = tmp_path / "judged"  # what git holds: the .xz, the manifest, the README
    shutil.copytree(JUDGED, committed, ignore=shutil.ignore_patterns("*.jsonl", "*.json", "*.tsv"))
    assert len(unpack(committed)) == len(manifest_names()) - 1 and mismatches(committed) == []
    assert unpack(committed) == []  # idempotent
    (committed / "hotpotqa" / "dev.jsonl").unlink()
    (committed / "scifact" / "qrels" / "test.tsv").write_text("edited\n")
    assert unpack(committed) == [committed / "hotpotqa" / "dev.jsonl"]
    assert mismatches(committed) == ["scifact/qrels/test.tsv"]
    assert not list(committed.rglob("*.tmp"))
