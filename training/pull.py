"""Stage `pull`: feedback log (Postgres) -> data/feedback/feedback.jsonl, incrementally.

The file holds the latest state of every query (merged by query id), so re-running, or killing and
re-running, loses and duplicates nothing. The watermark (updated_at, id) is kept beside it and only
moves after the file is in place; rows younger than `lag_seconds` wait for the next pull, so a
transaction that commits late cannot slip under the watermark.

Scopes: by default (`pull.scope: null`) every scope's feedback is pulled, and one ranker learns from all of it;
`pull.scope: alice/notes` pulls that scope's queries only, so no other scope's feedback enters the training data.
The watermark names the scope it was pulled for: a change of `pull.scope` starts the file afresh.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from retrieval.contracts.selection import current_name
from retrieval.db import connect, store_id
from retrieval.files import write_atomic
from retrieval.logs.feedback_records import CANDIDATE_KEYS, FEEDBACK_FILE, WATERMARK_FILE, FeedbackRecord
from retrieval.params import load_section
from retrieval.scopes import ScopeError, check
from retrieval.scrub import scrub_all

METRICS_FILE = "metrics.json"


@dataclass(frozen=True)
class PullParams:
    """The pull stage: the feedback log exported from PostgreSQL for training."""

    out: str = "data/feedback"
    """declared once, the stages below alias it; feedback.jsonl (latest state per query), watermark.json, metrics.json"""
    batch: int = 500
    """queries fetched per round trip"""
    lag_seconds: float = 5.0
    """rows younger than this wait for the next pull (late commits can't slip by)"""
    scope: str | None = None
    """null: every scope's feedback trains one ranker (global); a scope name, e.g. alice/notes: only its feedback"""

    def problems(self) -> list[str]:
        out = [
            p
            for p, bad in (
                ("pull.batch must be >= 1", self.batch < 1),
                ("pull.lag_seconds must be >= 0", self.lag_seconds < 0),
            )
            if bad
        ]
        if self.scope is not None:
            try:
                check(self.scope)
            except ScopeError as e:
                out.append(f"pull.{e}")
        return out


_SQL = """
SELECT q.id, q.text, q.created_at, q.updated_at, q.selector_version, q.picked_by, q.prompt_version,
       q.selection_status, q.threshold, q.rating, q.correction, q.answer,
       json_agg(json_build_object(
           'rank', c.rank, 'chunk_id', c.chunk_id, 'content_hash', c.content_hash, 'score', c.score,
           'source', ch.source, 'heading', ch.heading, 'parent_heading', ch.parent_heading, 'text', ch.text,
           'pick_rank', c.pick_rank, 'served_rank', c.served_rank, 'shown', c.shown,
           'propensity', c.propensity, 'previewed', c.previewed, 'preview_propensity', c.preview_propensity,
           'expanded', c.expanded, 'used', c.used) ORDER BY c.rank)
FROM queries q
JOIN query_candidates c ON c.query_id = q.id
LEFT JOIN chunks ch ON ch.id = c.chunk_id AND ch.content_hash = c.content_hash
WHERE (q.updated_at, q.id) > (%s, %s) AND q.updated_at < now() - make_interval(secs => %s)
  AND (%s::text IS NULL OR q.scope = %s::text)
GROUP BY q.id ORDER BY q.updated_at, q.id LIMIT %s
"""


def to_record(row: tuple, redactions: Counter) -> FeedbackRecord:
    """One exported query (contract 3, as a file); free text scrubbed again on the way out."""
    (
        qid,
        text,
        created,
        updated,
        version,
        picked_by,
        prompt_version,
        status,
        threshold,
        rating,
        correction,
        answer,
        cands,
    ) = row

    # every free text of the record scrubbed together: a secret found in one field goes from every other
    text_keys = ("text", "source", "heading", "parent_heading")
    results = scrub_all(
        [text, correction, answer] + [c.get(k) for c in cands for k in CANDIDATE_KEYS if k in text_keys]
    )
    for r in results:
        if r is not None:
            redactions.update(r.counts)
    clean = iter([None if r is None else r.text for r in results])
    query, correction, answer = next(clean), next(clean), next(clean)
    return {
        "query_id": qid,
        "query": query,
        "created_at": created.isoformat(),
        "updated_at": updated.isoformat(),
        "selector_version": current_name(version),  # the first-stage order logged under its old name reads as it
        "picked_by": picked_by,
        "prompt_version": prompt_version,
        "selection_status": status,
        "threshold": threshold,
        "rating": rating,
        "correction": correction,
        "answer": answer,
        "candidates": [{k: (next(clean) if k in text_keys else c.get(k)) for k in CANDIDATE_KEYS} for c in cands],
    }


def check_record(rec: dict) -> str | None:
    """Why a record cannot be used, or None."""
    if not isinstance(rec.get("query"), str) or not rec["query"].strip():
        return "empty query"
    ranks = [c.get("rank") for c in rec.get("candidates") or []]
    if not ranks:
        return "no candidates"
    if ranks != list(range(1, len(ranks) + 1)):
        return "candidate ranks are not 1..N"
    if rec.get("rating") not in (None, -1, 1):
        return "rating outside -1/+1"
    return None


def merge(old: dict[int, dict], new: list[dict]) -> dict[int, dict]:
    """Latest state per query id."""
    out = dict(old)
    out.update({r["query_id"]: r for r in new})
    return out


def summarize(records: dict[int, dict], pulled: int, skipped: Counter, redactions: Counter) -> dict:
    cands = [c for r in records.values() for c in r["candidates"]]
    return {
        "queries": len(records),
        "pulled_now": pulled,
        "with_used": sum(any(c["used"] for c in r["candidates"]) for r in records.values()),
        "used": sum(c["used"] is True for c in cands),
        "ignored": sum(c["used"] is False for c in cands),
        "unlabelled": sum(c["used"] is None for c in cands),
        "text_missing": sum(c["text"] is None for c in cands),
        "thumbs_up": sum(r["rating"] == 1 for r in records.values()),
        "thumbs_down": sum(r["rating"] == -1 for r in records.values()),
        "skipped": dict(skipped),
        "redactions": dict(redactions),
    }


def read_state(
    out: Path, scope: str | None = None, store: str | None = None
) -> tuple[dict[int, dict], tuple[str, int]]:
    """The records and watermark pulled so far for `scope` from `store` (the database's identity); none when they
    were pulled for another scope, or from another store (query ids start at 1 in every database: merged by id, one
    store's rows would overwrite another's and the rest stay), or when the watermark does not say which."""
    records: dict[int, dict] = {}
    w = json.loads((out / WATERMARK_FILE).read_text()) if (out / WATERMARK_FILE).exists() else None
    if w is None or w.get("scope") != scope or w.get("store") != store:  # none of it is this scope's, this store's
        return records, ("-infinity", 0)
    if (out / FEEDBACK_FILE).exists():
        for line in open(out / FEEDBACK_FILE, encoding="utf-8"):
            r = json.loads(line)
            records[r["query_id"]] = r
    return records, (w["updated_at"], w["query_id"])


def pull(params: PullParams, progress=None, url: str | None = None) -> dict:
    """The log's new and changed queries (of the database at `url`, default `database_url()`; a lab's scratch
    log) merged into `params.out`'s feedback file, then the watermark moved; returns the metrics."""
    out = Path(params.out)
    out.mkdir(parents=True, exist_ok=True)
    skipped, redactions, pulled = Counter(), Counter(), 0
    with connect(url) as conn:
        store = store_id(conn)
        records, mark = read_state(out, params.scope, store)
        while True:
            args = (mark[0], mark[1], params.lag_seconds, params.scope, params.scope, params.batch)
            rows = conn.execute(_SQL, args).fetchall()
            if not rows:
                break
            batch = []
            for row in rows:
                rec = to_record(row, redactions)
                why = check_record(rec)
                if why:
                    skipped[why] += 1
                else:
                    batch.append(rec)
            records = merge(records, batch)
            pulled += len(rows)
            last = rows[-1]
            mark = (last[3].isoformat(), last[0])
            if progress:
                progress(pulled)
    # 1. the data, then 2. the watermark: a kill between the two re-pulls rows, which merge absorbs
    write_atomic(
        out / FEEDBACK_FILE, "".join(json.dumps(records[k], ensure_ascii=False) + "\n" for k in sorted(records))
    )
    watermark = {"updated_at": mark[0], "query_id": mark[1], "scope": params.scope, "store": store}
    write_atomic(out / WATERMARK_FILE, json.dumps(watermark) + "\n")
    metrics = summarize(records, pulled, skipped, redactions) | {
        "scope": params.scope,
        "store": store,
    }  # None: every scope
    write_atomic(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    return metrics


def main() -> None:
    params = load_section("params.yaml", "pull", PullParams)
    console = Console(stderr=True)
    with console.status("pulling feedback") as status:
        metrics = pull(params, lambda n: status.update(f"pulling feedback: {n} queries"))
    console.print(
        f"pull: {metrics['pulled_now']} new/updated queries, {metrics['queries']} in {params.out}/{FEEDBACK_FILE} "
        f"({metrics['with_used']} with used chunks; skipped {metrics['skipped'] or 0})"
    )
    if metrics["queries"] == 0:
        raise SystemExit("pull: the feedback log is empty (run `pai lab simulate` or serve some queries first)")


if __name__ == "__main__":
    main()
