"""`pai forget` as a user runs it, on a real database and real files: --verify finds the marker, a forget leaves it
nowhere, hostile input is one line and changes nothing; `pai ingest --expires` takes a memory out of search."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from tests.forget_world import MARKER, make_world

runner = CliRunner()


@pytest.fixture
def world(conn, db_url, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.delenv("PAI_TOKEN", raising=False)
    w = make_world(conn, db_url, embedder, tmp_path)
    params = yaml.safe_load(open("params.yaml"))
    params["staging"]["dir"] = str(w.staging)
    params["forget"]["pipeline"] = w.fp.pipeline
    params["forget"]["dvc_cache"] = w.fp.dvc_cache
    params["maintain"]["feedback"] = str(w.feedback)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    w.params = tmp_path / "params.yaml"
    return w


def pai(w, *args):
    return runner.invoke(app, [*args, "--params", str(w.params)])


def test_verify_then_forget_then_verify(world, conn):
    r = pai(world, "forget", "--verify", MARKER)
    assert r.exit_code == 1 and "found: staging files" in r.output and "found: DVC cache" in r.output
    r = pai(world, "forget", "--doc", str(world.docs["note:marker"]), "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert (report["documents"], report["chunks"]) == (1, 1) and report["files"]["staging files"] >= 1
    r = pai(world, "forget", "--verify", MARKER)
    assert r.exit_code == 0, r.output
    assert "not found in the database nor in" in r.output and "vector cache" in r.output
    assert conn.execute("SELECT count(*) FROM documents").fetchone() == (3,)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--doc", "987654"], "no document 987654"),
        (["--doc", "x1"], "Invalid value"),  # typer's own refusal of a non-integer, in its box
        (["--source", "nothing.md"], "no document with source or path 'nothing.md'"),
        ([], "say what to forget"),
        (["--scope", "default"], "add --yes"),
        (["--scope", "Bad Scope!"], "scope"),
        (["--since", "yesterday"], "--since 'yesterday': give a date"),
        (["--since", "2030-01-01", "--until", "2020-01-01"], "--since must be before --until"),
        (["--text", ""], "--text is empty"),
        (["--verify", ""], "--verify needs a text"),
        (["--doc", "1", "--token", "not-a-known-token-at-all"], "not a known token"),
    ],
)
def test_hostile_input_is_one_line_and_changes_nothing(world, conn, all_text, args, says):
    before = all_text(conn)
    r = pai(world, "forget", *args)
    assert r.exit_code == 2, r.output
    assert says in r.output
    assert "Invalid value" in says or len(r.output.strip().splitlines()) == 1  # ours: one line
    assert all_text(conn) == before


def test_a_scoped_token_may_not_forget_another_scopes_document(world, conn, tmp_path, monkeypatch):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump([{"token": "t" * 32, "write": ["alice/*"], "default": "alice/notes"}]))
    monkeypatch.setenv("PAI_TOKENS_FILE", str(tokens))
    r = pai(world, "forget", "--doc", str(world.docs["note:marker"]), "--token", "t" * 32)
    assert r.exit_code == 2 and "scope 'default' is not yours to write: nothing forgotten" in r.output
    assert conn.execute("SELECT count(*) FROM documents").fetchone() == (4,)


def test_ingest_expires_takes_a_memory_out_of_search_at_once(world, conn, tmp_path):
    note = tmp_path / "soon.md"
    note.write_text("# Parking\n\nThe visitor parking permit number is 55-AQ-19 until Friday.\n")
    r = pai(world, "ingest", str(note), "--expires", "2000-01-01")
    assert r.exit_code == 0, r.output
    r = pai(world, "query", "visitor parking permit number", "--json", "--no-staging")
    assert r.exit_code == 0, r.output
    sources = {c["source"] for c in json.loads(r.stdout)["candidates"]}
    assert sources and not any("soon.md" in s for s in sources)  # the store answers, the expired note is not in it
    r = pai(world, "ingest", str(note), "--expires", "next tuesday")
    assert r.exit_code == 2 and "give days (30d), a date (2027-01-31) or never" in r.output
    r = pai(world, "maintain", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["expiry"]["forgotten"] == 1
    assert conn.execute("SELECT count(*) FROM documents WHERE path LIKE '%%soon.md'").fetchone() == (0,)
