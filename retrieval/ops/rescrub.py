"""Re-scrubbing (maintenance step 8): documents stored under an older scrubber (`retrieval.scrub.version()`: a
rule added or a rule set upgraded) get their chunks scrubbed again, oldest first, a batch per run, so a secret
stored before a rule existed goes."""

from __future__ import annotations

import psycopg

from .. import scrub
from ..chunking import Chunk
from ..db import first_line
from ..params import MaintainParams


def rescrub(conn, mp: MaintainParams, dry_run: bool) -> dict:
    """Re-scrub the chunks of documents stored under another scrubber version, oldest first, at most
    `mp.rescrub_batch` documents a run; each document in one transaction. A changed chunk keeps its id and
    vector (the secret's few tokens barely move it) and gets its new text, heading and content hash."""
    current = scrub.version()
    (stale,) = conn.execute(
        "SELECT count(*) FROM documents WHERE scrubbed_with IS DISTINCT FROM %s", (current,)
    ).fetchone()
    out = {"version": current, "stale_documents": stale, "documents": 0, "chunks_changed": 0, "redactions": {}}
    if dry_run or stale == 0 or mp.rescrub_batch == 0:
        return out
    ids = [
        i
        for (i,) in conn.execute(
            "SELECT id FROM documents WHERE scrubbed_with IS DISTINCT FROM %s ORDER BY id LIMIT %s",
            (current, mp.rescrub_batch),
        )
    ]
    redactions: dict[str, int] = {}
    out["errors"] = []
    for doc_id in ids:
        try:
            changed, counts = _rescrub_document(conn, doc_id, current)
        except psycopg.Error as e:  # this document only; it stays stale and is reported, the others go on
            out["errors"].append(f"document {doc_id}: {first_line(e)}")
            continue
        out["documents"] += 1
        out["chunks_changed"] += changed
        for kind, n in counts.items():
            redactions[kind] = redactions.get(kind, 0) + n
    out["redactions"] = redactions
    out["stale_documents"] = stale - out["documents"]
    return out


def _rescrub_document(conn, doc_id: int, current: str) -> tuple[int, dict[str, int]]:
    """One document, in one transaction, its chunks scrubbed together. Two chunks that differed only in their secret are one chunk after it:
    the later is deleted (the document's chunks are unique by content)."""
    changed, counts = 0, {}
    with conn.transaction():
        rows = conn.execute(
            "SELECT id, heading, parent_heading, text, content_hash FROM chunks WHERE document_id = %s ORDER BY ord, id"
            " FOR UPDATE",
            (doc_id,),
        ).fetchall()
        taken = {h for *_, h in rows}
        # the document's chunks together: a secret found in one chunk goes from every other (a bare copy)
        scrubbed = iter(scrub.scrub_all([x for _, heading, parent, text, _ in rows for x in (text, heading, parent)]))
        for cid, heading, parent, text, old_hash in rows:
            body, new_heading, new_parent = next(scrubbed), next(scrubbed), next(scrubbed)
            new_heading, new_parent = (None if r is None else r.text for r in (new_heading, new_parent))
            if (body.text, new_heading, new_parent) == (text, heading, parent):
                continue
            new_hash = Chunk(body.text, 0, 0, new_heading, new_parent).content_hash
            taken.discard(old_hash)
            if new_hash in taken:
                conn.execute(  # its id stays retired: the log and the staging files still name it
                    "WITH gone AS (DELETE FROM chunks WHERE id = %s RETURNING document_id, id)"
                    " INSERT INTO retired_chunks (document_id, chunk_id) SELECT * FROM gone ON CONFLICT DO NOTHING",
                    (cid,),
                )
            else:
                conn.execute(
                    "UPDATE chunks SET text = %s, heading = %s, parent_heading = %s, content_hash = %s WHERE id = %s",
                    (body.text, new_heading, new_parent, new_hash, cid),
                )
                taken.add(new_hash)
            changed += 1
            for kind, n in body.counts.items():
                counts[kind] = counts.get(kind, 0) + n
        conn.execute(
            "UPDATE documents SET scrubbed_with = %s, n_chunks = (SELECT count(*) FROM chunks WHERE document_id = %s)"
            " WHERE id = %s",
            (current, doc_id, doc_id),
        )
    return changed, counts
