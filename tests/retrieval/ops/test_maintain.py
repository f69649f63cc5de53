"""`retrieval.ops.maintain` on a real Postgres seeded with each kind of garbage: a dry run counts and
changes nothing, a real run removes exactly that garbage, a second run is a no-op."""

import json
import os
import threading
from datetime import UTC, datetime, timedelta

from retrieval.corpus.ingest import ingest_documents, ingest_paths
from retrieval.corpus.sources import Document
from retrieval.db import connect
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.ops import maintain
from retrieval.params import IngestParams, MaintainParams, SearchParams
from retrieval.query.search import search

NOTES = {
    "bees.md": "# Bees\n\nHoney bees collect nectar from flowers and store it as honey in wax combs.\n",
    "rivers.md": "# Rivers\n\nRivers carry fresh water from mountains down to the sea, shaping valleys.\n",
    "compilers.md": "# Compilers\n\nA compiler parses source code into a syntax tree and emits machine code.\n",
    "gone.md": "# Volcanoes\n\nMagma rises through the crust and erupts as lava from volcanic vents.\n",
}
SP = SearchParams(threshold=0.0)


def params(tmp_path, **kw) -> MaintainParams:
    return MaintainParams(
        feedback=str(tmp_path / "feedback"), staging_retention_days=30, feedback_retention_days=180, **kw
    )


def seed(conn, embedder, tmp_path) -> dict:
    """A store with one of each kind of garbage (and things that look alike but must stay)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    ingest_paths(conn, [notes], IngestParams(), SP, embedder)
    (notes / "gone.md").unlink()  # 1. a deleted source file
    # 2. a captured fact restated: the old document is superseded by the new one
    ingest_documents(
        conn,
        [
            Document("webhook:fact-1", "webhook:", "The staging server runs on port 8080.", "text"),
            Document("webhook:fact-2", "webhook:", "Deploy keys rotate every ninety days at midnight.", "text"),
        ],
        IngestParams(),
        SP,
        embedder,
    )
    conn.execute(
        "UPDATE documents SET superseded_by = (SELECT id FROM documents WHERE source = 'webhook:fact-2')"
        " WHERE source = 'webhook:fact-1'"
    )
    # 3. orphan rows, as a restore with triggers off leaves them (foreign keys keep them out otherwise)
    (bees,) = conn.execute("SELECT id FROM chunks WHERE source LIKE '%bees.md'").fetchone()
    (rivers,) = conn.execute("SELECT id FROM chunks WHERE source LIKE '%rivers.md'").fetchone()
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute("INSERT INTO chunk_terms (chunk_id, tsv) VALUES (999999, to_tsvector('lost'))")
        conn.execute("UPDATE chunks SET near_chunk_id = 999998, near_score = 0.8 WHERE id = %s", (bees,))
    conn.execute("DELETE FROM chunk_terms WHERE chunk_id = %s", (rivers,))  # a chunk keyword search cannot see
    # 4. feedback: two old queries (one pulled, one not yet), one recent; each uses the bees chunk
    ids = []
    for text in ("what do bees make?", "how is honey stored?", "where does nectar go?"):
        r = search(conn, embedder, text, SP)
        qid = log_query(conn, text, r.candidates, "first-stage", threshold=SP.threshold)
        record_feedback(conn, qid, used_chunk_ids=[bees])
        ids.append(qid)
    now = datetime.now(UTC)
    conn.execute("UPDATE queries SET updated_at = %s WHERE id = %s", (now - timedelta(days=400), ids[0]))
    conn.execute("UPDATE queries SET updated_at = %s WHERE id = %s", (now - timedelta(days=399), ids[1]))
    (tmp_path / "feedback").mkdir()
    (store,) = conn.execute("SELECT id::text FROM store_identity").fetchone()
    (tmp_path / "feedback" / "watermark.json").write_text(
        json.dumps({"updated_at": (now - timedelta(days=400)).isoformat(), "query_id": ids[0], "store": store})
    )
    # 5. staging files: an old day's (goes), today's and a stranger's file (stay)
    st = tmp_path / "staging"
    for rel in ("2020-01-01/000000-bees-a1.md", f"{now.date().isoformat()}/000000-bees-b2.md", "README.txt"):
        (st / rel).parent.mkdir(parents=True, exist_ok=True)
        (st / rel).write_text("x\n")
    return {"ids": ids, "bees": bees, "rivers": rivers, "staging": st, "notes": notes}


def snapshot(conn, all_text, staging_dir) -> tuple:
    return all_text(conn), sorted(str(p) for p in staging_dir.rglob("*"))


def test_dry_run_counts_real_run_removes_exactly_that_second_run_is_noop(
    conn, embedder, tmp_path, all_text, invariant_breaks
):
    s = seed(conn, embedder, tmp_path)
    mp = params(tmp_path)
    before = snapshot(conn, all_text, s["staging"])

    dry = maintain.run(conn, mp, SP, s["staging"], dry_run=True)
    assert snapshot(conn, all_text, s["staging"]) == before  # nothing changed
    real = maintain.run(conn, mp, SP, s["staging"])
    for r in (dry, real):
        assert (r.files_gone, r.documents_deleted, r.superseded_deleted, r.chunks_deleted) == (1, 1, 1, 2)
        assert r.orphans == {
            "chunk_terms_without_chunk": 1,
            "chunk_usage_without_chunk": 0,
            "chunks_without_document": 0,
            "near_links_to_missing_chunk": 1,
            "supersessions_of_missing_document": 0,
            "candidates_without_query": 0,
            "chunks_without_full_text": 1,
        }
        assert (r.feedback_deleted, r.feedback_kept_unpulled, r.staging_deleted) == (1, 1, 1)
        assert r.usage["chunks_weighted"] >= 1 and r.usage["up"] == 1 and r.skipped is None
    assert dry.usage["changed"] > 0 and real.usage["changed"] > 0  # (dry counts the log before its deletions)

    sources = {s for (s,) in conn.execute("SELECT source FROM documents")}
    assert not any(x.endswith("gone.md") for x in sources) and "webhook:fact-1" not in sources
    assert len(sources) == 4 and "webhook:fact-2" in sources
    assert invariant_breaks(conn) == []  # every chunk has its full-text row again, no stray ones
    assert conn.execute("SELECT near_chunk_id FROM chunks WHERE id = %s", (s["bees"],)).fetchone() == (None,)
    assert [q for (q,) in conn.execute("SELECT id FROM queries ORDER BY id")] == s["ids"][1:]  # unpulled stays
    left = sorted(p.relative_to(s["staging"]).as_posix() for p in s["staging"].rglob("*") if p.is_file())
    assert left == sorted(["README.txt", f"{datetime.now(UTC).date().isoformat()}/000000-bees-b2.md"])
    assert not (s["staging"] / "2020-01-01").exists()
    (w,) = conn.execute("SELECT weight FROM chunk_usage WHERE chunk_id = %s", (s["bees"],)).fetchone()
    assert 0 < w <= mp.usage_bound
    assert conn.execute("SELECT count(*) FROM maintenance_runs").fetchone() == (1,)

    again = maintain.run(conn, mp, SP, s["staging"])
    assert (again.documents_deleted, again.superseded_deleted, again.chunks_deleted, again.feedback_deleted) == (
        0,
        0,
        0,
        0,
    )
    assert sum(again.orphans.values()) == 0 and again.staging_deleted == 0
    assert (again.usage["changed"], again.usage["dropped"], again.feedback_kept_unpulled) == (0, 0, 1)


def test_unpulled_feedback_survives_without_a_watermark(conn, embedder, tmp_path):
    s = seed(conn, embedder, tmp_path)
    (tmp_path / "feedback" / "watermark.json").unlink()
    r = maintain.run(conn, params(tmp_path), SP, s["staging"])
    assert (r.feedback_deleted, r.feedback_kept_unpulled) == (0, 2)
    assert conn.execute("SELECT count(*) FROM queries").fetchone() == (3,)


def test_another_stores_watermark_deletes_nothing_here(conn, embedder, tmp_path):
    """A watermark pulled from another database (query ids start at 1 in each) says nothing of this one's queries."""
    seed(conn, embedder, tmp_path)
    conn.execute("UPDATE store_identity SET id = gen_random_uuid()")  # the folder's export is now another store's
    r = maintain.run(conn, params(tmp_path), SP, tmp_path / "staging")
    assert (r.feedback_deleted, r.feedback_kept_unpulled) == (0, 2)
    assert conn.execute("SELECT count(*) FROM queries").fetchone() == (3,)


def test_most_files_missing_deletes_none(conn, embedder, tmp_path):
    s = seed(conn, embedder, tmp_path)
    for p in s["notes"].iterdir():
        p.unlink()  # an unmounted disk looks like this
    r = maintain.run(conn, params(tmp_path), SP, s["staging"])
    assert r.documents_deleted == 0 and "none deleted" in r.warnings[0]
    assert conn.execute("SELECT count(*) FROM documents WHERE path LIKE '/%'").fetchone() == (4,)


def test_empty_store_is_a_clean_noop(conn, tmp_path):
    for dry in (True, False, False):
        r = maintain.run(conn, params(tmp_path), SP, tmp_path / "no-staging-here", dry_run=dry)
        assert r.skipped is None and r.warnings == [] and r.index_check is None
        assert r.chunks_deleted == r.feedback_deleted == r.staging_deleted == sum(r.orphans.values()) == 0
        assert r.usage == {"chunks_weighted": 0, "up": 0, "down": 0, "changed": 0, "dropped": 0}


def test_a_second_concurrent_run_skips_cleanly(conn, db_url, tmp_path):
    with connect(db_url) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (maintain.LOCK_ID,))  # a run in progress elsewhere
        r = maintain.run(conn, params(tmp_path), SP, tmp_path)
        assert r.skipped == "another maintenance run holds the lock" and r.usage == {}
        other.execute("SELECT pg_advisory_unlock(%s)", (maintain.LOCK_ID,))
    assert maintain.run(conn, params(tmp_path), SP, tmp_path).skipped is None  # the lock was released


def test_runs_racing_in_threads_never_overlap(db_url, tmp_path):
    """Eight runs at once: each one runs or skips cleanly (no error, no deadlock), and only those that ran left a record."""
    spans, lock = [], threading.Lock()

    def one():
        with connect(db_url) as c:
            t0 = datetime.now(UTC)
            r = maintain.run(c, params(tmp_path), SP, tmp_path)
            with lock:
                spans.append((r.skipped, t0, datetime.now(UTC)))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ran = [(a, b) for skipped, a, b in spans if skipped is None]
    assert len(spans) == 8 and ran
    with connect(db_url) as c:
        assert c.execute("SELECT count(*) FROM maintenance_runs").fetchone() == (len(ran),)


def test_index_recall_is_checked_once_then_after_growth(conn, tmp_path):
    import numpy as np

    sp = SearchParams(top_k=4)
    rng = np.random.default_rng(0)

    def add(n):
        (doc,) = conn.execute(
            "INSERT INTO documents (source, path, content_hash, n_chunks) VALUES (%s, 'webhook:', 'h', %s) RETURNING id",
            (f"webhook:v{os.urandom(4).hex()}", n),
        ).fetchone()
        for i in range(n):
            v = rng.normal(size=384).astype(np.float32)
            conn.execute(
                "INSERT INTO chunks (document_id, source, ord, start_line, end_line, text, content_hash, tokens, embedding)"
                " VALUES (%s, 'webhook:v', %s, 1, 1, %s, %s, 1, %s)",
                (doc, i, f"vector {i}", os.urandom(8).hex(), v / np.linalg.norm(v)),
            )

    mp = params(tmp_path, recheck_growth=0.2, recheck_queries=10, min_recall=0.5)
    add(10)  # under 5 * top_k chunks: too few to measure
    assert maintain.run(conn, mp, sp, tmp_path).index_check is None
    add(20)
    assert maintain.run(conn, mp, sp, tmp_path, dry_run=True).index_check == {"due": True, "chunks": 30}
    first = maintain.run(conn, mp, sp, tmp_path).index_check
    assert first["chunks"] == 30 and first["queries"] == 10 and 0 <= first["recall"] <= 1
    assert maintain.run(conn, mp, sp, tmp_path).index_check is None  # no growth since
    add(5)  # 35 < 30 * 1.2
    assert maintain.run(conn, mp, sp, tmp_path).index_check is None
    add(1)  # 36 >= 36
    assert maintain.run(conn, mp, sp, tmp_path).index_check["chunks"] == 36
    assert conn.execute("SELECT count(*) FROM index_checks").fetchone() == (2,)


def test_a_role_that_does_not_own_the_tables_gets_a_warning_not_a_crash(conn, db_url, tmp_path):
    """An external database where the service's role may delete rows but not REINDEX/VACUUM."""
    import numpy as np
    from psycopg.conninfo import make_conninfo

    role = f"pai_maint_{os.urandom(3).hex()}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
    conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
    v = np.ones(384, dtype=np.float32) / np.sqrt(384)
    for n in ("a", "b"):
        (doc,) = conn.execute(
            "INSERT INTO documents (source, path, content_hash, n_chunks) VALUES (%s, 'webhook:', 'h', 1) RETURNING id",
            (f"webhook:{n}",),
        ).fetchone()
        conn.execute(
            "INSERT INTO chunks (document_id, source, ord, start_line, end_line, text, content_hash, tokens, embedding)"
            " VALUES (%s, %s, 0, 1, 1, 'x', 'h', 1, %s)",
            (doc, f"webhook:{n}", v),
        )
    conn.execute("UPDATE documents SET superseded_by = id + 1 WHERE source = 'webhook:a'")
    try:
        with connect(make_conninfo(db_url, user=role), migrate_schema=False) as c:
            r = maintain.run(c, params(tmp_path), SP, tmp_path)
        assert r.superseded_deleted == 1 and "chunks" in r.vacuumed
        assert any("not allowed for this role" in w for w in r.warnings)
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_secret_stored_before_a_rule_existed_is_gone_after_maintenance(conn, embedder, tmp_path, monkeypatch):
    """Stored by an older scrubber (one without the provider rule set), a Linear API key sits in a chunk and in
    its full-text row; one maintenance run re-scrubs it (counted), a second finds nothing stale."""
    from retrieval import scrub
    from retrieval.corpus import ingest as ingest_module
    from retrieval.scrub import ScrubResult

    key = "lin_api_q8Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ1kL3mN5o"
    note = Document(
        "note:triage", "note:", f"# Triage bot\n\nThe bot posts with {key} every morning.", "markdown", None
    )
    with monkeypatch.context() as m:  # the scrubber as it was last month: no rule for this key
        m.setattr(ingest_module, "scrub", ScrubResult)
        m.setattr(ingest_module, "scrub_version", lambda: "rules-old+kingfisher-secret-scanner-none")
        ingest_documents(conn, [note], IngestParams(), SP, embedder)
    (text,) = conn.execute("SELECT text FROM chunks WHERE source = 'note:triage'").fetchone()
    assert key in text  # last month's scrubber let it through
    (found,) = conn.execute(
        "SELECT count(*) FROM chunk_terms WHERE tsv @@ plainto_tsquery('english', %s)", (key,)
    ).fetchone()
    assert found == 1

    mp = params(tmp_path)
    dry = maintain.run(conn, mp, SP, tmp_path, dry_run=True).rescrub
    assert dry["stale_documents"] == 1 and dry["documents"] == 0
    assert key in conn.execute("SELECT text FROM chunks WHERE source = 'note:triage'").fetchone()[0]

    real = maintain.run(conn, mp, SP, tmp_path).rescrub
    assert real["documents"] == 1 and real["chunks_changed"] == 1 and real["stale_documents"] == 0
    assert sum(real["redactions"].values()) == 1
    text, content_hash, version = conn.execute(
        "SELECT c.text, c.content_hash, d.scrubbed_with FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.source = 'note:triage'"
    ).fetchone()
    assert key not in text and "[REDACTED:" in text and version == scrub.version()
    (found,) = conn.execute(
        "SELECT count(*) FROM chunk_terms WHERE tsv @@ plainto_tsquery('english', %s)", (key,)
    ).fetchone()
    assert found == 0  # the full-text row followed the text
    assert search(conn, embedder, "triage bot", SP).candidates[0].text == text  # still found, now clean
    again = maintain.run(conn, mp, SP, tmp_path).rescrub
    assert again["documents"] == 0 and again["stale_documents"] == 0
    # re-ingesting the unchanged file later stores nothing new: the document is current
    r = ingest_documents(conn, [note], IngestParams(), SP, embedder)
    assert r.documents_unchanged == 1 and r.chunks_inserted == 0


def test_two_chunks_that_differed_only_in_their_secret_become_one(conn, embedder, tmp_path, monkeypatch):
    """Unique by content within a document: after re-scrubbing, the second copy goes instead of failing the run."""
    from retrieval.corpus import ingest as ingest_module
    from retrieval.scrub import ScrubResult

    a, b = "lin_api_q8Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ1kL3mN5o", "lin_api_Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ1kL3mN5oq8"
    text = f"# Bot\n\nThe triage bot posts with {a} every day.\n\n# Bot\n\nThe triage bot posts with {b} every day."
    note = Document("note:twins", "note:", text, "markdown", None)
    with monkeypatch.context() as m:
        m.setattr(ingest_module, "scrub", ScrubResult)
        m.setattr(ingest_module, "scrub_version", lambda: "rules-old")
        ingest_documents(conn, [note], IngestParams(), SP, embedder)
    assert conn.execute("SELECT count(*) FROM chunks WHERE source = 'note:twins'").fetchone()[0] == 2
    r = maintain.run(conn, params(tmp_path), SP, tmp_path).rescrub
    assert r["documents"] == 1 and r["chunks_changed"] == 2 and not r["errors"]
    rows = conn.execute("SELECT text FROM chunks WHERE source = 'note:twins'").fetchall()
    assert len(rows) == 1 and a not in rows[0][0] and b not in rows[0][0]
    assert conn.execute("SELECT n_chunks FROM documents WHERE source = 'note:twins'").fetchone()[0] == 1
