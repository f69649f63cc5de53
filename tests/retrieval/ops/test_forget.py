"""`retrieval.ops.forget` on a real Postgres and real files: a note with a unique marker reaches every place (the
store, the log, staging, the pulled feedback, training data, DVC's cache, MLflow's artifacts, the vector cache);
forgetting it leaves the marker nowhere and everything else as it was. Hostile targets change nothing."""

import json

import pytest

from retrieval.contracts.passage import passage_text
from retrieval.embed import MODEL_ID
from retrieval.embedding_cache import key
from retrieval.ops import forget_files
from retrieval.ops.forget import ForgetError, Target, begin, forget, resume
from tests.forget_world import MARKER, QUERIES, make_world

NO_MARK = None  # these tests have no registry: the marking has its own test


@pytest.fixture
def world(conn, db_url, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))  # the vector cache and MLflow's folders: this test's
    return make_world(conn, db_url, embedder, tmp_path)


def places(w, **kw):
    return forget_files.places(w.fp, w.staging, home=w.home, **kw)


def snapshot(conn) -> dict:
    """What a forget of the marker note must leave as it was."""
    return {
        "docs": conn.execute(
            "SELECT source, n_chunks FROM documents WHERE source <> 'note:marker' ORDER BY 1"
        ).fetchall(),
        "labels": conn.execute(
            "SELECT q.text, c.rank, c.used FROM query_candidates c JOIN queries q ON q.id = c.query_id"
            " WHERE c.chunk_id IN (SELECT id FROM chunks WHERE source <> 'note:marker') ORDER BY 1, 2"
        ).fetchall(),
        "queries": conn.execute("SELECT id, text FROM queries ORDER BY id").fetchall(),
    }


def test_verify_finds_the_marker_in_every_place_before(conn, world):
    found = {t.place for t in forget_files.verify(conn, MARKER, places(world))}
    pipeline = {f"pipeline files {world.feedback}", f"pipeline files {world.datasets}"}
    assert found == {"database", "staging files", "DVC cache", "MLflow artifacts"} | pipeline
    tables = {t.where.split(":")[0] for t in forget_files.verify(conn, MARKER, []) if t.place == "database"}
    assert tables == {"table chunks", "table queries", "table learned_qa"}


def test_forget_a_document_leaves_no_trace_and_keeps_the_rest(conn, world):
    before = snapshot(conn)
    passages = conn.execute(
        "SELECT id, parent_heading, heading, text FROM chunks WHERE source = 'note:marker'"
    ).fetchall()
    keys = [key(MODEL_ID, passage_text(h, t, p)) for _, p, h, t in passages]
    (shown,) = conn.execute(
        "SELECT count(*) FROM query_candidates WHERE chunk_id = %s AND shown", (passages[0][0],)
    ).fetchone()
    report = forget(conn, Target(doc_ids=(world.docs["note:marker"],)), places(world), mark=NO_MARK)

    assert (report.documents, report.chunks) == (1, 1)
    assert report.learned_answers == shown >= 1  # learned from an answer that could quote it
    assert forget_files.verify(conn, MARKER, places(world)) == []
    assert snapshot(conn) == before  # the other notes, their labels, every query of the log
    # the log's rows of the forgotten chunk stay in their places, without a label or a text to point at
    rows = conn.execute(
        "SELECT used, content_hash FROM query_candidates WHERE chunk_id = %s", (passages[0][0],)
    ).fetchall()
    assert len(rows) == len(QUERIES) and all(u is None and h == "forgotten" for u, h in rows)
    # the pull's file keeps every query; the marker's candidates have no text and no label
    records = [json.loads(line) for line in open(world.feedback / "feedback.jsonl")]
    assert sorted(r["query"] for r in records) == sorted(q for q, _, _ in QUERIES)
    marker_q = next(r for r in records if r["query"].startswith("what is the garden"))
    assert marker_q["answer"] is None and marker_q["candidates"][0]["used"] is None
    # training data: the queries that showed it left it; the vector cache lost its passage, kept the others
    lines = [json.loads(x) for f in ("train", "val") for x in open(world.datasets / f"{f}.jsonl")]
    assert all(MARKER not in json.dumps(x) for x in lines)
    from retrieval.embedding_cache import EmbeddingCache

    cache = EmbeddingCache(world.home / "embeddings.sqlite", MODEL_ID, 384)
    stored = {k for (k,) in cache._db.execute("SELECT key FROM vectors")}
    assert not set(keys) & stored and len(stored) >= 3
    # the journal is closed and holds nothing of it
    (state, job) = conn.execute("SELECT state, job FROM forget_journal WHERE id = %s", (report.journal_id,)).fetchone()
    assert state == "done" and set(job) == {"chunk_ids"}  # ids only: nothing of its text


def test_forget_a_text_rewrites_the_query_that_asked_it(conn, world, embedder):
    from retrieval.logs.feedback import log_query
    from retrieval.query.search import search
    from tests.forget_world import SP

    r = search(conn, embedder, f"when was {MARKER} set?", SP)
    log_query(conn, f"when was {MARKER} set?", r.above, "first-stage", shown=[1], threshold=0.0)
    report = forget(conn, Target(text=MARKER), places(world), mark=NO_MARK)
    assert report.documents == 1 and report.queries_rewritten >= 2
    assert forget_files.verify(conn, MARKER, places(world)) == []
    texts = [t for (t,) in conn.execute("SELECT text FROM queries ORDER BY id")]
    assert texts[-1] == "when was [forgotten] set?" and len(texts) == len(QUERIES) + 1


def test_an_earlier_version_that_was_served_is_forgotten_with_the_note(conn, world, embedder):
    """The note served (its staging file and log name its chunk), then changed and ingested again: its old chunk
    is gone from the store, yet forgetting the note forgets that version's copies too."""
    from tests.forget_world import ingest

    old = conn.execute("SELECT id FROM chunks WHERE source = 'note:marker'").fetchall()
    ingest(conn, embedder, notes={"note:marker": "# Shed\n\nThe shed has no padlock any more.\n"})
    assert conn.execute("SELECT count(*) FROM chunks WHERE text LIKE %s", (f"%{MARKER}%",)).fetchone() == (0,)
    assert {"staging files", "database"} <= {t.place for t in forget_files.verify(conn, MARKER, places(world))}
    retired = conn.execute("SELECT chunk_id FROM retired_chunks WHERE document_id = %s", (world.docs["note:marker"],))
    assert {c for (c,) in retired} == {c for (c,) in old}
    report = forget(conn, Target(source="note:marker"), places(world), mark=NO_MARK)
    assert report.documents == 1
    assert forget_files.verify(conn, MARKER, places(world)) == []
    assert forget_files.verify(conn, "no padlock any more", places(world)) == []
    assert conn.execute("SELECT count(*) FROM retired_chunks").fetchone() == (0,)


def test_an_interrupted_forget_resumes(conn, world):
    """A crash after the database's part: the rows are gone at once, the files still hold it until a resume."""
    report = begin(conn, Target(source="note:marker"))
    assert conn.execute("SELECT count(*) FROM documents WHERE source = 'note:marker'").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM chunks WHERE source = 'note:marker'").fetchone() == (0,)
    left = {t.place for t in forget_files.verify(conn, MARKER, places(world))}
    assert "staging files" in left and "database" not in left  # the rows are gone at once, the files wait
    (state,) = conn.execute("SELECT state FROM forget_journal WHERE id = %s", (report.journal_id,)).fetchone()
    assert state == "files"  # the journal says what they must still lose
    done = resume(conn, places(world), mark=NO_MARK)
    assert [d.journal_id for d in done] == [report.journal_id]
    assert forget_files.verify(conn, MARKER, places(world)) == []
    assert resume(conn, places(world), mark=NO_MARK) == []  # nothing left open


def counts(conn, all_text) -> tuple:
    return (
        conn.execute("SELECT count(*) FROM documents").fetchone()[0],
        conn.execute("SELECT count(*) FROM chunks").fetchone()[0],
        len(all_text(conn)),
    )


@pytest.mark.parametrize(
    "target, says",
    [
        (Target(doc_ids=(987654,)), "no document 987654"),
        (Target(source="note:nothing"), "no document with source"),
        (Target(source="note:marke"), "no document with source"),  # a look-alike of a stored source
        (Target(source="note:marker\0"), "NUL"),
        (Target(doc_ids=(2**62,)), "no document"),
        (Target(), "say what to forget"),
        (Target(text="   "), "--text is empty"),
        (Target(text="a\0b"), "NUL"),
        (Target(scope="nobody/here"), "no document matches"),
        (Target(scope="default"), "add --yes"),  # every document of the store
    ],
)
def test_hostile_targets_change_nothing(conn, world, all_text, target, says):
    before = counts(conn, all_text)
    with pytest.raises(ForgetError, match=says) as e:
        forget(conn, target, places(world), mark=NO_MARK)
    assert "\n" not in str(e.value)
    assert counts(conn, all_text) == before
    assert forget_files.verify(conn, MARKER, places(world)) != []  # nothing of it was touched


def test_another_scopes_document_is_refused_to_a_token(conn, world, embedder, all_text):
    from tests.forget_world import ingest

    theirs = ingest(conn, embedder, "bob/notes", {"note:bob": "# Bob\n\nBob keeps his bicycle in the hallway.\n"})
    before = counts(conn, all_text)
    mine = lambda scope: scope == "default"  # noqa: E731 - a token that writes `default` only
    for target in (Target(doc_ids=(theirs["note:bob"],)), Target(scope="bob/notes")):
        with pytest.raises(ForgetError, match="not yours to write"):
            forget(conn, target, places(world), may_write=mine, mark=NO_MARK)
    assert counts(conn, all_text) == before
    # a text target with the token stays inside its scopes: bob's note holding the text stays
    ingest(conn, embedder, "bob/notes", {"note:bob2": f"# Bob2\n\nBob also knows {MARKER}.\n"})
    forget(conn, Target(text=MARKER), places(world), may_write=mine, mark=NO_MARK)
    scopes = conn.execute("SELECT scope FROM chunks WHERE strpos(text, %s) > 0", (MARKER,)).fetchall()
    assert scopes == [("bob/notes",)]


def test_a_wide_target_needs_confirming(conn, world):
    with pytest.raises(ForgetError, match="matches 4 of the store's 4 documents: add --yes"):
        forget(conn, Target(scope="default"), places(world), mark=NO_MARK)
    report = forget(conn, Target(scope="default"), places(world), confirmed=True, mark=NO_MARK)
    assert report.documents == 4 and conn.execute("SELECT count(*) FROM queries").fetchone() == (len(QUERIES),)


def test_a_huge_text_that_matches_nothing_changes_nothing(conn, world, all_text):
    before = counts(conn, all_text)
    report = forget(conn, Target(text="x" * 1_000_000), places(world), mark=NO_MARK)
    assert (report.documents, report.queries_rewritten, sum(report.files.values())) == (0, 0, 0)
    assert counts(conn, all_text)[:2] == before[:2]
    assert forget_files.verify(conn, MARKER, places(world)) != []  # the marker is where it was


def test_verify_reads_a_text_with_quotes_and_backslashes(conn, world, embedder):
    from tests.forget_world import ingest

    odd = 'she said "open\\sesame" twice'
    ingest(conn, embedder, "default", {"note:odd": f"# Odd\n\nAt the door {odd}.\n"})
    assert [t.where for t in forget_files.verify(conn, odd, [])] == ["table chunks: 1 row(s)"]
    forget(conn, Target(text=odd), places(world), mark=NO_MARK)
    assert forget_files.verify(conn, odd, places(world)) == []


def test_a_git_staging_dir_commits_the_rewrite_and_verify_names_its_history(conn, world):
    import subprocess

    git = ["git", "-C", str(world.staging), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "queries"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    forget(conn, Target(source="note:marker"), places(world), mark=NO_MARK)
    head = subprocess.run([*git, "grep", "-c", MARKER, "HEAD"], capture_output=True, text=True)
    assert head.returncode == 1  # the latest commit no longer holds it
    traces = forget_files.verify(conn, MARKER, places(world))
    assert [(t.place, t.where.split(": ")[-1]) for t in traces] == [
        ("staging files", "the staging history (staging.git)")
    ]
