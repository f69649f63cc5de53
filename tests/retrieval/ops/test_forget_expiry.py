"""Expiry on a real Postgres: what `--expires` and the params' defaults read as, search skipping an expired memory at
once, maintenance forgetting it (and its staging file's copy) through the same core as `pai forget`."""

from datetime import UTC, datetime, timedelta

import pytest

from retrieval.corpus import expiry
from retrieval.ops import forget_files, maintain
from retrieval.params import ForgetParams, MaintainParams, ParamsError, expiry_rules, load_section
from retrieval.query.search import search
from tests.forget_world import MARKER, SP, make_world

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_parse_reads_days_dates_and_never():
    assert expiry.parse("30d", NOW) == NOW + timedelta(days=30)
    assert expiry.parse("2027-01-31", NOW) == datetime(2027, 1, 31, tzinfo=UTC)
    assert expiry.parse("2027-01-31T10:00+02:00", NOW).utcoffset() == timedelta(hours=2)
    assert expiry.parse("never", NOW) is None
    for bad in ("", "30", "-3d", "next tuesday", "9" * 40 + "d", "2027-13-01", "30d\0"):
        with pytest.raises(expiry.ExpiryError, match="give days"):
            expiry.parse(bad, NOW)


def test_default_days_source_then_scope_then_everything():
    fp = ForgetParams(expiry_days=90, expiry_scopes="alice/*=7, bob/tmp=0", expiry_sources="*/scratch/*=1")
    assert expiry.default_days(fp, "alice/notes", "/home/a/scratch/x.md", "/home/a/scratch/x.md") == 1
    assert expiry.default_days(fp, "alice/notes", "/home/a/notes/x.md", "/home/a/notes/x.md") == 7
    assert expiry.default_days(fp, "alice", "n", "n") == 7  # `alice/*` holds alice itself
    assert expiry.default_days(fp, "alicex", "n", "n") == 90  # a look-alike name is not under it
    assert expiry.default_days(fp, "bob/tmp", "n", "n") == 0  # never, said per scope


@pytest.mark.parametrize("bad", ["alice", "alice=x", "=3", "a=-1", "a=1.5"])
def test_malformed_rules_are_one_problem_each(bad, tmp_path):
    with pytest.raises(ValueError, match="is not name=days"):
        expiry_rules(bad)
    p = tmp_path / "params.yaml"
    p.write_text(f"forget:\n  expiry_scopes: '{bad}'\n  expiry_days: -1\n")
    with pytest.raises(ParamsError, match="expiry_days must be >= 0.*forget.expiry_scopes"):
        load_section(p, "forget", ForgetParams)


def test_stamp_defaults_and_search_skips_expired_at_once(conn, db_url, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    w = make_world(conn, db_url, embedder, tmp_path)
    assert expiry.stamp_defaults(conn, ForgetParams()) == 0  # no defaults: nothing stamped
    n = expiry.stamp_defaults(conn, ForgetParams(expiry_sources="note:m*=3"))
    assert n == 1
    (when,) = conn.execute("SELECT expires_at - written_at FROM documents WHERE source = 'note:marker'").fetchone()
    assert when == timedelta(days=3)
    assert "note:marker" in {c.source for c in search(conn, embedder, "garden shed padlock code", SP).candidates}

    conn.execute("UPDATE documents SET expires_at = now() - interval '1 second' WHERE source = 'note:marker'")
    found = {c.source for c in search(conn, embedder, "garden shed padlock code", SP).candidates}
    assert "note:marker" not in found and found  # gone from search at once; the others still answer

    mp = MaintainParams(feedback=str(w.feedback), staging_retention_days=0, feedback_retention_days=0)
    dry = maintain.run(conn, mp, SP, w.staging, dry_run=True, fp=w.fp)
    assert dry.expiry == {"expired": 1}
    report = maintain.run(conn, mp, SP, w.staging, fp=w.fp)
    assert (report.expiry["forgotten"], report.expiry["chunks"]) == (1, 1)
    places = forget_files.places(w.fp, w.staging, home=w.home)
    assert forget_files.verify(conn, MARKER, places) == []
    assert maintain.run(conn, mp, SP, w.staging, fp=w.fp).expiry["forgotten"] == 0  # the next run: nothing


def test_maintenance_finishes_an_interrupted_forget(conn, db_url, embedder, tmp_path, monkeypatch):
    from retrieval.ops.forget import Target, begin

    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    w = make_world(conn, db_url, embedder, tmp_path)
    begin(conn, Target(source="note:marker"))  # the process died after the database's part
    mp = MaintainParams(feedback=str(w.feedback), staging_retention_days=0, feedback_retention_days=0)
    assert maintain.run(conn, mp, SP, w.staging, fp=w.fp).expiry["resumed"] == 1
    assert forget_files.verify(conn, MARKER, forget_files.places(w.fp, w.staging, home=w.home)) == []
