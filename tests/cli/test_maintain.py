"""`pai maintain` as a user runs it, against a real database: the dry run reports and changes
nothing, the real run removes exactly what it reported, the next run is a no-op, a run that finds
another one in progress skips cleanly."""

import json

import yaml
from typer.testing import CliRunner

from cli.main import app
from retrieval.db import connect
from retrieval.ops import maintain

runner = CliRunner()


def setup(tmp_path, monkeypatch, db_url):
    monkeypatch.setenv("DATABASE_URL", db_url)
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in {
        "a.md": "# Bees\n\nHoney bees store nectar as honey.\n",
        "b.md": "# Rivers\n\nRivers carry water to the sea.\n",
        "c.md": "# Stars\n\nStars fuse hydrogen into helium.\n",
    }.items():
        (notes / name).write_text(text)
    old = tmp_path / "staging" / "2021-03-04" / "101010-q-abc.md"
    old.parent.mkdir(parents=True)
    old.write_text("old\n")
    params = yaml.safe_load(open("params.yaml"))
    params["maintain"]["feedback"] = str(tmp_path / "feedback")
    params["staging"]["dir"] = str(tmp_path / "staging")
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(params))
    r = runner.invoke(app, ["ingest", str(notes), "--params", str(p), "--json"])
    assert r.exit_code == 0, r.output
    (notes / "c.md").unlink()
    return p, old


def counts(db_url) -> tuple:
    with connect(db_url) as c:
        return c.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)").fetchone()


def test_dry_run_then_run_then_noop(db_url, tmp_path, monkeypatch):
    p, old = setup(tmp_path, monkeypatch, db_url)
    r = runner.invoke(app, ["maintain", "--dry-run", "--json", "--params", str(p)])
    assert r.exit_code == 0, r.output
    dry = json.loads(r.stdout)
    assert (dry["dry_run"], dry["documents_deleted"], dry["chunks_deleted"], dry["staging_deleted"]) == (True, 1, 1, 1)
    assert counts(db_url) == (3, 3) and old.exists()

    r = runner.invoke(app, ["maintain", "--params", str(p)])  # the table a person reads
    assert r.exit_code == 0, r.output
    assert "documents of gone files (1 files)" in r.output and "1 deleted" in r.output
    assert counts(db_url) == (2, 2) and not old.exists()

    r = runner.invoke(app, ["maintain", "--json", "--params", str(p)])
    again = json.loads(r.stdout)
    assert (again["documents_deleted"], again["chunks_deleted"], again["staging_deleted"]) == (0, 0, 0)
    assert again["usage"]["changed"] == 0 and counts(db_url) == (2, 2)


def test_a_run_in_progress_elsewhere_makes_this_one_skip(db_url, tmp_path, monkeypatch):
    p, old = setup(tmp_path, monkeypatch, db_url)
    with connect(db_url) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (maintain.LOCK_ID,))
        r = runner.invoke(app, ["maintain", "--params", str(p)])
        assert r.exit_code == 0 and "maintenance skipped: another maintenance run holds the lock" in r.output
        assert counts(db_url) == (3, 3) and old.exists()
