"""The `pai` command line: `pai ingest` / `pai query` as a user runs them, against a real database, and the
map `pai --help` shows."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from eval import judged_sets
from retrieval.query import staging

runner = CliRunner()


def test_ingest_then_query_writes_a_staging_file(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "pg.md").write_text("# Postgres\n\n## Vectors\n\npgvector adds HNSW indexes for cosine search.\n")
    (notes / "food.md").write_text("# Cooking\n\nBoil pasta for ten minutes in salted water.\n")
    (notes / "blob.txt").write_bytes(b"\x00\x01")
    r = runner.invoke(app, ["ingest", str(notes), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert (report["documents_new"], report["chunks_inserted"], len(report["errors"])) == (2, 2, 1)

    r = runner.invoke(app, ["query", "how do I index vectors?", "--json", "--staging-dir", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["candidates"][0]["source"].endswith("pg.md")
    sf = staging.read(tmp_path / "st" / out["staging_file"].split("/st/")[1])
    assert sf.query == "how do I index vectors?"
    # the staging file holds what may enter the context: the candidates at or above the threshold, topped up with
    # the best below it to the floor (search.min_chunks, 3): here both notes
    assert [c.chunk_id for c in sf.candidates] == [c["chunk_id"] for c in out["candidates"]][:3]


def test_ingest_and_query_take_a_scope(db_url, conn, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    for scope, text in (("alice/notes", "Alice feeds the cat at seven."), ("bob", "Bob feeds the cat at nine.")):
        (tmp_path / scope.replace("/", "-")).mkdir()
        (tmp_path / scope.replace("/", "-") / "cat.md").write_text(f"# Cat\n\n{text}\n")
        r = runner.invoke(app, ["ingest", str(tmp_path / scope.replace("/", "-")), "--scope", scope, "--json"])
        assert r.exit_code == 0 and json.loads(r.stdout)["chunks_inserted"] == 1, r.output
    found = lambda *a: {
        c["source"].split("/")[-2]
        for c in json.loads(runner.invoke(app, ["query", "cat", "--json", "--no-staging", *a]).stdout)["candidates"]
    }  # noqa: E501, E731
    assert found("--scope", "bob") == {"bob"} and found() == {"alice-notes", "bob"}
    for bad in ("..", "Alice", "a\x00b", "x" * 10_000, "\u0430lice"):
        for argv in (["query", "cat", "--scope", bad], ["ingest", str(tmp_path), "--scope", bad]):
            r = runner.invoke(app, argv)
            assert r.exit_code == 2 and "scope" in r.output and len(r.output.strip().splitlines()) <= 3, r.output
    assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 2


def test_bad_params_and_empty_query_are_one_line_errors(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    bad = tmp_path / "params.yaml"
    bad.write_text("search:\n  top_k: 0\n")
    r = runner.invoke(app, ["query", "x", "--params", str(bad)])
    assert r.exit_code == 2 and "search.top_k must be in 1..1000" in r.output
    r = runner.invoke(app, ["query", "   "])
    assert r.exit_code == 2 and "empty query" in r.output


def test_database_down_is_a_clean_exit(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:secretpw@127.0.0.1:1/db")
    (tmp_path / "a.md").write_text("hello\n")
    r = runner.invoke(app, ["ingest", str(tmp_path)])
    assert r.exit_code == 2 and "database unavailable" in r.output and "secretpw" not in r.output


def test_help_is_a_map_daily_commands_on_top_the_lab_tools_under_lab():
    import click
    import typer.main

    top = typer.main.get_command(app)
    ctx = click.Context(top)

    def panels(group: click.Group) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name in group.list_commands(ctx):
            if not group.get_command(ctx, name).hidden:  # what the help lists
                out.setdefault(group.get_command(ctx, name).rich_help_panel, []).append(name)
        return out

    assert panels(top) == {
        "Use": ["ingest", "query", "serve", "mcp", "watch", "capture", "forget", "hooks"],
        "Retrain and deploy": ["retrain", "eval", "status", "promote", "rollback", "job"],
        "Upkeep": ["maintain", "migrate", "export", "import"],
        "The lab": ["lab"],
    }
    lab = top.get_command(ctx, "lab")
    groups = {"lab": lab, "lab bench": lab.get_command(ctx, "bench")}
    assert panels(lab) == {
        "The feedback loop": ["cycle", "simulate", "grounding", "notes", "teacher", "trial", "loop"],
        "The GPU path": ["gpu-smoke"],
        "Benchmarks": ["bench"],
    }
    assert len(groups["lab bench"].list_commands(ctx)) == 17
    listed = [c for c in map(lambda n: top.get_command(ctx, n), top.list_commands(ctx)) if not c.hidden]
    listed += [g.get_command(ctx, n) for g in groups.values() for n in g.list_commands(ctx)]
    lines = [(c.name, c.short_help or c.help) for c in listed]  # what the listings print: one line each
    assert [(n, t) for n, t in lines if "\n" in t or len(t) > 66] == []
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0 and all(p in r.output for p in ("Use", "Retrain and deploy", "Upkeep", "The lab"))
    assert top.get_command(ctx, "bench").hidden and "│ bench" not in r.output  # the benchmarks are the lab's


def test_pai_bench_is_a_hidden_alias_of_pai_lab_bench_that_says_so(tmp_path):
    """For one release `pai bench ...` still runs `pai lab bench ...`, with one line on stderr."""
    old, new = (
        subprocess.run(
            [sys.executable, "-m", "cli.main", *group, "build-man", "--man-root", str(tmp_path / "none")]
            + ["--out", str(tmp_path / "m.jsonl")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        for group in (["bench"], ["lab", "bench"])
    )
    assert old.returncode == new.returncode != 0, (old.stderr, new.stderr)
    assert old.stderr.splitlines()[0] == "`pai bench` is now `pai lab bench`" and "pai bench" not in new.stderr
    assert old.stderr.strip().splitlines()[-1] == new.stderr.strip().splitlines()[-1]  # the same command's error


def test_a_command_unpacks_the_judged_sets_first_in_one_line(tmp_path, monkeypatch):
    """A fresh clone has only the committed .xz: any `pai` command unpacks them first, saying so once."""
    committed = tmp_path / "judged"  # what git holds: the .xz, the manifest, the README
    shutil.copytree(judged_sets.JUDGED, committed, ignore=shutil.ignore_patterns("*.jsonl", "*.json", "*.tsv"))
    monkeypatch.setattr(judged_sets, "JUDGED", committed)
    r = runner.invoke(app, ["mcp", "--transport", "carrier-pigeon", "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and r.output.count("unpacked 11 judged benchmark files") == 1, r.output
    assert judged_sets.mismatches(committed) == []
    r = runner.invoke(app, ["mcp", "--transport", "carrier-pigeon", "--url", "http://127.0.0.1:9"])
    assert "unpacked" not in r.output


def _options(group, path: tuple[str, ...] = ()):
    """(command path, option) for every option of every command under `group`."""
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command.hidden:  # `pai bench`: the alias of `pai lab bench`, walked there
            continue
        if hasattr(command, "list_commands"):
            yield from _options(command, (*path, name))
        else:
            yield from (((*path, name), p) for p in command.params)


def test_no_option_default_restates_a_params_yaml_value():
    """An option params.yaml has a value for defaults to None and reads it there (its help says so): change
    params.yaml and the command follows. A default equal to a params.yaml value of the same name, or to one of its
    paths or words, would be a second copy that stays behind."""
    import typer.main
    import yaml

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text(encoding="utf-8"))
    by_name: dict[str, list] = {}
    words: set[str] = set()
    for values in raw.values():
        for key, value in (values or {}).items():
            by_name.setdefault(key, []).append(value)
            if isinstance(value, str) and value:
                words.add(value)
    not_knobs = {"max_queries"}  # 0 = all: a cap on a run, not a knob
    other_seeds = {
        ("lab", "bench", "build-man"),
        ("lab", "bench", "build-domains"),
    }  # sets with no params section of their own
    copies = [
        (" ".join(path), p.name, p.default)
        for path, p in _options(typer.main.get_command(app))
        if p.default is not None
        and not isinstance(p.default, bool)
        and p.name not in not_knobs
        and not (p.name == "seed" and path in other_seeds)
        and (p.default in by_name.get(p.name, []) or str(p.default) in words)
    ]
    assert copies == []


def test_a_value_changed_in_params_yaml_changes_the_commands_default(tmp_path, benchmark_dir):
    """--benchmark-dir and bench embed's --batch-size, left out, are params.yaml's: another file, other defaults;
    a bad value there is one line, exit 2."""
    params = tmp_path / "params.yaml"
    params.write_text(f"benchmark:\n  benchmark_dir: {tmp_path / 'elsewhere'}\nembed:\n  batch_size: 3\n")
    r = runner.invoke(app, ["lab", "notes", str(tmp_path / "notes"), "--params", str(params)])
    assert r.exit_code == 2 and str(tmp_path / "elsewhere" / "scifact") in r.output, r.output
    dev = str(benchmark_dir / "hotpotqa" / "dev.jsonl")
    embed = ["lab", "bench", "embed", "--benchmark", dev, "--backends", "torch:f32", "--max-queries", "2", "--json"]
    r = runner.invoke(app, [*embed, "--params", str(params)])
    assert r.exit_code == 0 and json.loads(r.stdout)["batch_size"] == 3, r.output
    r = runner.invoke(app, [*embed, "--params", str(params), "--batch-size", "5"])
    assert r.exit_code == 0 and json.loads(r.stdout)["batch_size"] == 5, r.output
    notes = ["lab", "notes", str(tmp_path / "notes")]
    for bad, argv in (
        ("benchmark:\n  benchmark_dir: [1, 2]\n", notes),
        ("benchmark:\n  benchmark_dir: [1, 2]\n", ["lab", "bench", "general"]),  # its default file is under it
        ('benchmark:\n  split: "test\\u0000"\n', notes),
        ("embed:\n  batch_size: lots\n", ["lab", "bench", "embed"]),
    ):
        params.write_text(bad)
        r = runner.invoke(app, [*argv, "--params", str(params)])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    assert not (tmp_path / "notes").exists()
