"""Every path that stores text redacts every copy of a secret: a document stores it twice (the second copy bare,
in another chunk; or a secret cut by a chunk boundary), and so do a capture, a remembered note, a query (in the
query log and its staging file), a feedback answer and its correction, a pulled record and the LLM dataset built
from it. Real PostgreSQL, real files, the real embedder."""

import base64
import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

from retrieval.chunking import chunk_document
from retrieval.conversation import intake
from retrieval.conversation.intake import Exchange
from retrieval.corpus.ingest import ingest_documents, ingest_paths
from retrieval.corpus.sources import Document
from retrieval.logs import feedback
from retrieval.params import IngestParams, SearchParams, UsedParams
from retrieval.query import staging
from retrieval.query.search import search
from training.build import BuildParams, build_examples
from training.pull import to_record

K = "Zq8Lm3Tx9Vb2Nc7Rf4Hk1Wp6Yd5Gs0Ja"
NAMED, BARE = f"api_key: {K}", f"I pasted {K} into the form"  # the first copy found by its name, the second bare
IP, SP = replace(IngestParams(), chunk_tokens=64), SearchParams()
FILLER = "\n\n".join(f"## Step {i}\n\nRun the build, check the logs, ship it. " * 3 for i in range(12))
DOC = f"# Deploy\n\n{NAMED}\n\n{FILLER}\n\n## Rotation\n\n{BARE}, then revoked it.\n"
BODY = "\n".join(base64.b64encode(bytes([i] * 48)).decode() for i in range(40))
PEM = f"-----BEGIN PRIVATE KEY-----\n{BODY}\n-----END PRIVATE KEY-----"
SPLIT = "Notes on the server.\n\n" + "Some text here. " * 40 + "\n\n" + PEM + "\n\nMore text after. " * 10


def leaks(text: str) -> bool:
    return K in text or any(line in text for line in BODY.split("\n"))


def test_ingest_a_second_copy_in_another_chunk_and_a_key_cut_by_a_boundary(conn, embedder, tmp_path, all_text):
    assert len({i for i, c in enumerate(chunk_document(DOC, "markdown", 64)) if K in c.text}) == 2
    (tmp_path / "deploy.md").write_text(DOC)
    (tmp_path / "server.txt").write_text(SPLIT)
    report = ingest_paths(conn, [tmp_path], IP, SP, embedder)
    assert report.errors == [] and report.documents_new == 2
    (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    assert chunks > 6 and not leaks(all_text(conn)) and "[REDACTED:" in all_text(conn)


def test_remember_a_note_with_two_copies(conn, embedder, all_text):
    note = Document("webhook:deploy-notes", "webhook:", DOC, "markdown", "Deploy notes")
    report = ingest_documents(conn, [note], IP, SP, embedder)
    assert report.errors == [] and not leaks(all_text(conn))


def test_capture_the_copy_in_the_other_turn(conn, all_text):
    intake.submit(conn, Exchange(f"my {NAMED}", f"Stored. {BARE}.", source=f"cli {K}", session="s1"))
    assert not leaks(all_text(conn)) and "[REDACTED:" in all_text(conn)


def test_query_log_and_staging_file_and_feedback(conn, embedder, tmp_path, all_text):
    (tmp_path / "n.md").write_text("# Deploys\n\nHow deploys work: push, build, ship.\n")
    ingest_paths(conn, [tmp_path / "n.md"], IP, SP, embedder)
    result = search(conn, embedder, f"why does {NAMED} fail? {BARE}", SP)
    path = staging.write(staging.from_result(result), tmp_path / "st")
    assert not leaks(path.read_text())
    qid = feedback.log_query(conn, result.query, result.candidates, "first-stage")
    assert not leaks(all_text(conn))
    # the answer names the secret, the correction repeats it bare: scrubbed together
    feedback.record_feedback(conn, qid, answer=f"Use {NAMED} [1]", correction=f"Not {K}: rotate it.", rating=1)
    stored = all_text(conn)
    assert not leaks(stored) and stored.count("[REDACTED:") >= 4


def test_pulled_record_and_the_llm_dataset(all_text):
    now = datetime.now(UTC)
    cands = [
        {
            "rank": r,
            "chunk_id": r,
            "content_hash": "h",
            "score": 0.9 - r / 10,
            "source": f"/d{r}.md",
            "heading": None,
            "text": f"passage {r}: {BARE}",
            "pick_rank": r,
            "used": r == 1,
        }
        for r in (1, 2)
    ]
    row = (
        1,
        f"why does {NAMED} fail?",
        now,
        now,
        "first-stage",
        None,
        "p/1",
        "ok",
        0.2,
        1,
        None,
        f"See {K} [1]",
        cands,
    )
    redactions = Counter()
    rec = to_record(row, redactions)
    assert not leaks(json.dumps(rec)) and sum(redactions.values()) >= 4
    splits, pairs, _ = build_examples([rec], BuildParams(val_fraction=0.01, shuffles=1), UsedParams())
    assert splits["train"] and not leaks(json.dumps(splits) + json.dumps(pairs))


def test_rescrub_redacts_the_bare_copy_in_another_chunk(conn, embedder, tmp_path, monkeypatch, all_text):
    """Stored raw by an older scrubber, the named copy and the bare one in different chunks: re-scrubbing the
    document's chunks together takes both."""
    from retrieval.corpus import ingest as ingest_module
    from retrieval.ops import maintain
    from retrieval.params import MaintainParams
    from retrieval.scrub import ScrubResult

    with monkeypatch.context() as m:
        m.setattr(ingest_module, "scrub", ScrubResult)
        m.setattr(ingest_module, "scrub_version", lambda: "rules-old")
        ingest_documents(conn, [Document("note:deploy", "note:", DOC, "markdown", None)], IP, SP, embedder)
    assert leaks(all_text(conn))
    mp = MaintainParams(feedback=str(tmp_path / "feedback"))
    r = maintain.run(conn, mp, SP, tmp_path).rescrub
    assert r["documents"] == 1 and r["chunks_changed"] == 2 and not leaks(all_text(conn))
