"""Capture against a real Postgres and the real MiniLM: each gate rejects what it should, facts are
scrubbed, deduplicated, tagged and searchable, and the noise prototypes learn and persist."""

import numpy as np

from retrieval.conversation import capture, intake, noise
from retrieval.conversation.capture import CaptureParams
from retrieval.conversation.intake import Exchange
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import search

FENCE = "```"
GH = "ghp_" + "Zq4Xw8Rt2Yu6Io0Pa3Sd7Fg1Hj5Kl9Mn2Bv6C"  # synthetic, as in tests/data/secrets_corpus.jsonl
REDIS = (
    "Redis keeps its whole dataset in memory and persists it to disk with RDB snapshots or an append-only file. "
    "Memcached, unlike Redis, has no persistence at all and loses everything on restart."
)
CHATTER = [
    f"I've updated {o} as you asked and pushed it to your branch. Let me know if you want me to {v} it as well. "
    f"Next I'll {v} the tests and then get back to you, once the whole suite has finished running."
    for o in ("the config loader", "the README", "the login handler", "the Dockerfile", "the CI workflow")
    for v in ("review", "rerun", "clean up", "check", "tidy up")
]
SEARCH = SearchParams(threshold=0.0)


def run(conn, embedder, assistant, user="tell me", params=CaptureParams(), extractor=None):
    cid = intake.submit(conn, Exchange(user, assistant))
    return capture.process(conn, cid, params, IngestParams(), SEARCH, embedder, extractor)


def test_each_cheap_gate_rejects_what_it_should(conn, embedder):
    assert (
        r := run(conn, embedder, "Thanks, I'll update that for you!")
    ).gate == "prefilter" and r.status == "rejected"
    assert run(conn, embedder, "Redis is an in-memory store.").gate == "length"
    code_only = f"{FENCE}python\n" + "def add(a, b):\n    return a + b\n" * 10 + FENCE
    r = run(conn, embedder, code_only)
    assert r.gate == "length" and "code removed" in r.reason
    r = run(conn, embedder, CHATTER[0])
    assert (r.gate, r.decided_by) == ("quality", "rules") and "noise gate cold" in r.reason
    assert capture.counters(conn)["rejected"] == {"prefilter": 1, "length": 2, "noise": 0, "quality": 1}


def test_facts_are_stored_scrubbed_tagged_and_searchable(conn, embedder, all_text):
    answer = f"{REDIS}\n\nThe deploy token of the staging registry is {GH} and it rotates every quarter.\n\n{FENCE}\nredis-cli ping\n{FENCE}"
    r = run(conn, embedder, answer)
    assert (r.status, r.gate, r.decided_by) == ("stored", "store", "rules") and len(r.fact_ids) == 3
    rows = conn.execute(
        "SELECT d.kind, d.capture_id, c.text FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ANY(%s)",
        (r.fact_ids,),
    ).fetchall()
    assert {(k, c) for k, c, _ in rows} == {("fact", r.id)}
    assert not any("redis-cli" in t for _, _, t in rows)  # code is not a fact
    assert GH not in all_text(conn) and "[REDACTED" in all_text(conn)
    found = search(conn, embedder, "which store loses its data on restart?", SEARCH)
    assert found.candidates[0].chunk_id in r.fact_ids and found.candidates[0].source.startswith("capture:")


def test_the_exchange_s_source_and_session_are_scrubbed_too(conn, embedder, all_text):
    ex = Exchange("tell me", REDIS, source="cli password=hunter2x9", session=GH)
    cid = intake.submit(conn, ex)
    source, session, redactions = conn.execute(
        "SELECT source, session, redactions FROM captures WHERE id = %s", (cid,)
    ).fetchone()
    assert "hunter2x9" not in source and GH not in session and "[REDACTED" in source + session
    assert sum(redactions.values()) >= 2
    r = capture.process(conn, cid, CaptureParams(), IngestParams(), SEARCH, embedder, None)
    assert r.status == "stored"
    text = all_text(conn)
    assert "hunter2x9" not in text and GH not in text


def test_duplicate_facts_are_skipped_and_near_ones_linked(conn, embedder):
    first = run(conn, embedder, REDIS)
    again = run(conn, embedder, "Sure! " + REDIS)
    assert again.status == "duplicate" and again.fact_ids == [] and sorted(again.duplicate_of) == sorted(first.fact_ids)
    assert conn.execute("SELECT count(*) FROM documents WHERE kind = 'fact'").fetchone()[0] == len(first.fact_ids)
    near = run(conn, embedder, "Redis is an in-memory database; it can write RDB snapshots to disk for durability.")
    assert near.status == "stored" and near.linked == 1
    c = capture.counters(conn)
    assert (c["stored"], c["duplicate"], c["fact_duplicates"], c["fact_links"]) == (2, 1, len(first.fact_ids), 1)


def test_prototypes_rebuild_every_25_rejections_and_the_noise_gate_learns(conn, embedder, db_url):
    params = CaptureParams(noise_rebuild_every=25, noise_prototypes=4)
    for text in CHATTER[:24]:
        assert run(conn, embedder, text, params=params).gate == "quality"
    assert noise.load(conn).cold
    assert run(conn, embedder, "ok", params=params).gate == "prefilter"  # the 25th rejection, any gate
    protos = noise.load(conn)
    assert (protos.version, len(protos.centroids), protos.rejections) == (1, 4, 25)
    assert sum(p["size"] for p in protos.examples) == 25 and all(p["texts"] for p in protos.examples)
    assert np.allclose(np.linalg.norm(protos.centroids, axis=1), 1, atol=1e-5)

    # a new connection (as a restarted service or another process) reads the same prototypes
    with connect(db_url) as other:
        again = noise.load(other)
        assert again.version == 1 and np.array_equal(again.centroids, protos.centroids)
        r = run(other, embedder, CHATTER[24], params=params)
        assert r.gate == "noise" and r.noise_score >= params.noise_threshold and r.decided_by == "noise"
        assert run(other, embedder, REDIS, params=params).status == "stored"  # durable text passes the gate


def test_the_ring_buffer_keeps_the_last_n(conn, embedder):
    params = CaptureParams(noise_buffer=5, noise_rebuild_every=3, noise_prototypes=2)
    for i in range(7):
        run(conn, embedder, ["ok", "thanks!", "Done."][i % 3], params=params)
    assert conn.execute("SELECT count(*), max(slot) FROM capture_noise_buffer").fetchone() == (5, 4)
    assert noise.load(conn).version == 2


class Llm:
    name = "llm:test"

    def __init__(self, output):
        self.output, self.prompts = output, []

    def complete(self, messages, max_tokens):
        self.prompts.append(messages)
        return self.output


def test_an_llm_extractor_decides_when_configured_and_rules_stand_in_when_it_is_unparsable(conn, embedder):
    llm = Llm("FACT: Redis keeps its whole dataset in memory.\nFACT: Memcached has no persistence.")
    r = run(conn, embedder, REDIS + f"\n{FENCE}\nsecret code\n{FENCE}", extractor=llm)
    assert (r.status, r.decided_by, len(r.fact_ids)) == ("stored", "llm:test", 2)
    assert "secret code" not in llm.prompts[0][1]["content"]  # code is stripped before judging
    r = run(conn, embedder, CHATTER[0], extractor=Llm("SKIP"))
    assert (r.gate, r.decided_by) == ("quality", "llm:test")
    r = run(
        conn,
        embedder,
        "Kafka stores messages in partitioned, replicated, append-only logs on disk for days.",
        extractor=Llm("hmm"),
    )
    assert r.status == "stored" and r.decided_by == "rules (llm:test output unparsable)"


def test_processing_is_once_and_failures_are_recorded(conn, embedder):
    cid = intake.submit(conn, Exchange("q", REDIS))
    assert capture.process(conn, cid, CaptureParams(), IngestParams(), SEARCH, embedder, None).status == "stored"
    assert capture.process(conn, cid, CaptureParams(), IngestParams(), SEARCH, embedder, None) is None
    cid = intake.submit(conn, Exchange("q", REDIS))
    capture.fail(conn, cid, "RuntimeError: boom")
    assert capture.result(conn, cid).status == "failed" and intake.pending_ids(conn) == []


def test_a_restated_fact_supersedes_the_older_one_and_maintain_collects_it(conn, embedder, tmp_path):
    """A newer fact in the near band (>= supersede_threshold, < ingest's dup_threshold) supersedes an older
    captured fact; a merely related one does not; `pai maintain`'s run deletes only the superseded one."""
    from retrieval.ops.maintain import run as maintain
    from retrieval.params import MaintainParams

    old = run(
        conn,
        embedder,
        "The staging database runs PostgreSQL 16 on port 5433 and is backed up every night at two o'clock.",
    )
    related = run(
        conn, embedder, "Backups of the production database are kept for thirty days in the encrypted object store."
    )
    new = run(
        conn,
        embedder,
        "The staging database was upgraded to PostgreSQL 17; it listens on port 5433 and is backed up nightly.",
    )
    assert (old.status, related.status, new.status) == ("stored", "stored", "stored") and new.linked == 1
    superseded = conn.execute(
        "SELECT d.capture_id, d.superseded_by FROM documents d WHERE d.kind = 'fact' AND d.superseded_by IS NOT NULL"
    ).fetchall()
    new_doc = conn.execute("SELECT document_id FROM chunks WHERE id = %s", (new.fact_ids[0],)).fetchone()[0]
    assert superseded == [(old.id, new_doc)]
    report = maintain(conn, MaintainParams(), SEARCH, tmp_path)
    assert report.superseded_deleted == 1
    left = {r[0] for r in conn.execute("SELECT capture_id FROM documents WHERE kind = 'fact'").fetchall()}
    assert left == {related.id, new.id}
