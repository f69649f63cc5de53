"""Capture: durable facts out of a conversation's exchanges, off the request path.

intake (validate, scrub, one `captures` row, status pending: retrieval/conversation/intake.py) -> `process`:
the gates in order, 1. pre-filter (string rules), 2. length (of the prose, code removed), 3. code stripping,
4. noise score (cosine to prototypes learned from past rejections, retrieval/conversation/noise.py),
5. quality + atomic facts (an LLM extractor when one is configured, else the rule splitter),
6. scrub, dedup/link and store each fact exactly as ingest does (`ingest_documents`), as a
document of kind 'fact' tied to its exchange (retrieval/conversation/facts.py). Whatever the gates decide, the
exchange itself joins its session's conversation (retrieval/conversation/exchanges.py, `capture.conversation`). The decision and the writes are one
transaction per exchange, so a crash leaves it pending, to be taken up again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import psycopg

from ..embed import Embedder
from ..params import IngestParams, SearchParams
from . import noise
from .capture_rules import extract_messages, is_procedural, parse_facts, split_facts, strip_code
from .exchanges import store_exchange
from .facts import store_facts, supersede
from .intake import Exchange

GATES = ("prefilter", "length", "noise", "quality")


@dataclass(frozen=True)
class CaptureParams:
    """Facts from conversation exchanges: the gates an exchange passes, the extractor, supersession. Read by `POST
    /capture` and `pai capture`."""

    min_chars: int = 80
    """assistant prose (fenced code removed) shorter than this is skipped: the "length" gate"""
    max_chars: int = 100_000
    """a user or assistant text longer than this is refused (413, or one error line in the CLI)"""
    prefilter_max_chars: int = 200
    """only turns this short can be judged procedural ("ok", "I'll update that") by string rules"""
    noise_threshold: float = 0.35
    """max cosine to a learned noise prototype at/above which a text is rejected (see pai lab bench capture)"""
    noise_buffer: int = 500
    """the last this many rejections (any gate) are what the prototypes are learned from"""
    noise_rebuild_every: int = 25
    """prototypes rebuilt (k-means, swapped in one row) after every this many rejections"""
    noise_prototypes: int = 8
    """k of the k-means; before the first rebuild there are none and the gate passes all"""
    fact_min_chars: int = 40
    """rule splitter: a shorter sentence is merged with the next one"""
    fact_max_chars: int = 600
    """rule splitter: a longer sentence (or merge) is not an atomic fact"""
    extractor_ollama: str = ""
    """Ollama model tag of the LLM extractor, used when OLLAMA_HOST is reachable"""
    extractor_gguf: str = ""
    """else this GGUF in-process (llama.cpp); both empty: the rule splitter decides ("rules")"""
    extractor_max_tokens: int = 256
    """tokens the LLM extractor may write"""
    max_pending: int = 1000
    """the service answers 429 while this many exchanges wait"""
    supersede_threshold: float = 0.85
    """a new fact this close (cosine) to an older captured fact supersedes it (pai maintain collects it)"""
    seed: int = 13
    """k-means seeding"""
    conversation: bool = True
    """each exchange also stored as it was said: a dated user/assistant turn pair of its session's conversation
    document (retrieval/conversation/exchanges.py), found by later queries"""

    def problems(self) -> list[str]:
        out = []
        if not 0 <= self.min_chars < self.max_chars:
            out.append("capture: need 0 <= min_chars < max_chars")
        if not -1 <= self.noise_threshold <= 1:
            out.append("capture.noise_threshold must be a cosine in [-1, 1]")
        if self.noise_buffer < 1 or self.noise_rebuild_every < 1 or self.noise_prototypes < 1:
            out.append("capture: noise_buffer, noise_rebuild_every and noise_prototypes must be >= 1")
        if not 1 <= self.fact_min_chars <= self.fact_max_chars:
            out.append("capture: need 1 <= fact_min_chars <= fact_max_chars")
        if self.extractor_max_tokens < 1 or self.max_pending < 1 or self.prefilter_max_chars < 0:
            out.append("capture: extractor_max_tokens and max_pending must be >= 1, prefilter_max_chars >= 0")
        return out


class Extractor(Protocol):
    """An LLM behind the extractor prompt (serving/extractor.py)."""

    name: str  # "llm:<model>", recorded as decided_by

    def complete(self, messages: list[dict[str, str]], max_tokens: int) -> str: ...


@dataclass
class Decision:
    gate: str | None  # the gate that rejected, None when facts came out
    reason: str
    decided_by: str  # rules | noise | llm:<model>
    text: str  # the assistant's prose, code removed
    vector: np.ndarray | None = None  # its embedding, when the noise gate computed one
    noise_score: float | None = None
    facts: list[str] = field(default_factory=list)


def decide(
    ex: Exchange, protos: noise.Prototypes, params: CaptureParams, embedder: Embedder, extractor: Extractor | None
) -> Decision:
    """Gates 1-5, writing nothing: the first that rejects decides; else the facts."""
    if why := is_procedural(ex.assistant, params.prefilter_max_chars):
        return Decision("prefilter", why, "rules", ex.assistant)
    text = strip_code(ex.assistant)
    if len(text) < params.min_chars:
        return Decision("length", f"{len(text)} characters of prose (code removed) < {params.min_chars}", "rules", text)
    vector = embedder.encode([text[: noise.BUFFER_TEXT_CHARS]])[0]
    s = noise.score(protos, vector)
    if s is not None and s >= params.noise_threshold:
        return Decision(
            "noise", f"cosine {s:.3f} to a noise prototype >= {params.noise_threshold}", "noise", text, vector, s
        )
    cold = " (noise gate cold: no prototypes yet)" if s is None else ""
    facts, decided_by = None, "rules"
    if extractor is not None:
        facts = parse_facts(extractor.complete(extract_messages(ex.user, text), params.extractor_max_tokens))
        decided_by = extractor.name if facts is not None else f"rules ({extractor.name} output unparsable)"
    if facts is None:
        facts = split_facts(text, params.fact_min_chars, params.fact_max_chars)
    if not facts:
        return Decision("quality", f"no self-contained fact{cold}", decided_by, text, vector, s)
    return Decision(None, f"{len(facts)} fact(s){cold}", decided_by, text, vector, s, facts)


@dataclass(frozen=True)
class CaptureResult:
    id: int
    status: str  # pending | stored | duplicate | rejected | failed
    gate: str | None
    decided_by: str | None
    reason: str | None
    noise_score: float | None
    fact_ids: list[int]
    duplicate_of: list[int]
    linked: int
    seconds: float | None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def process(
    conn: psycopg.Connection,
    capture_id: int,
    params: CaptureParams,
    ingest: IngestParams,
    search: SearchParams,
    embedder: Embedder,
    extractor: Extractor | None,
) -> CaptureResult | None:
    """Decide one pending exchange and write the outcome, in one transaction; None when it is not
    pending (done already, or another worker holds it)."""
    t0 = time.perf_counter()
    with conn.transaction():
        row = conn.execute(
            """SELECT user_text, assistant_text, source, session, scope FROM captures
               WHERE id = %s AND status = 'pending' FOR UPDATE SKIP LOCKED""",
            (capture_id,),
        ).fetchone()
        if row is None:
            return None
        ex, scope = Exchange(*row[:4]), row[4]
        d = decide(ex, noise.load(conn), params, embedder, extractor)
        fact_ids, duplicate_of, linked = [], [], 0
        if d.gate is not None:
            noise.record_rejection(
                conn,
                capture_id,
                d.gate,
                d.text,
                d.vector,
                buffer_size=params.noise_buffer,
                rebuild_every=params.noise_rebuild_every,
                k=params.noise_prototypes,
                seed=params.seed,
                embedder=embedder,
            )
            status, gate = "rejected", d.gate
        else:
            fact_ids, duplicate_of, linked = store_facts(conn, capture_id, d.facts, ingest, search, embedder, scope)
            supersede(conn, fact_ids, params.supersede_threshold)
            status, gate = ("stored" if fact_ids else "duplicate"), "store"
        if (
            params.conversation
        ):  # what was said, whatever the gates made of it: after the facts, so they dedup as before
            store_exchange(conn, capture_id, ingest, search, embedder, scope)
        conn.execute(
            """UPDATE captures SET status = %s, gate = %s, decided_by = %s, reason = %s, noise_score = %s,
                   fact_ids = %s, duplicate_of = %s, linked = %s, seconds = %s, processed_at = now()
               WHERE id = %s""",
            (status, gate, d.decided_by, d.reason, d.noise_score, fact_ids, duplicate_of, linked,
             time.perf_counter() - t0, capture_id),
        )  # fmt: skip
    return result(conn, capture_id)


def result(conn: psycopg.Connection, capture_id: int, scopes: list[str] | None = None) -> CaptureResult | None:
    """What became of a capture; None when there is none of that id in `scopes` (None: in any scope)."""
    row = conn.execute(
        """SELECT id, status, gate, decided_by, reason, noise_score, fact_ids, duplicate_of, linked, seconds
           FROM captures WHERE id = %s AND (%s::text[] IS NULL OR scope = ANY(%s::text[]))""",
        (capture_id, scopes, scopes),
    ).fetchone()
    return CaptureResult(*row) if row else None


def fail(conn: psycopg.Connection, capture_id: int, why: str) -> None:
    conn.execute(
        "UPDATE captures SET status = 'failed', reason = %s, processed_at = now() WHERE id = %s AND status = 'pending'",
        (why[:500], capture_id),
    )


def counters(conn: psycopg.Connection, scopes: list[str] | None = None) -> dict:
    """Captures of `scopes` (None: all) per outcome and gate, facts stored / duplicated / linked, and the noise
    gate's state (one gate for every scope)."""
    rows = conn.execute(
        """SELECT status, gate, count(*), coalesce(sum(cardinality(fact_ids)), 0),
                  coalesce(sum(cardinality(duplicate_of)), 0), coalesce(sum(linked), 0)
           FROM captures WHERE %s::text[] IS NULL OR scope = ANY(%s::text[]) GROUP BY status, gate""",
        (scopes, scopes),
    ).fetchall()
    rejected = dict.fromkeys(GATES, 0)
    out = {"captures": 0, "pending": 0, "stored": 0, "duplicate": 0, "failed": 0}
    facts = dups = links = 0
    for status, gate, n, f, dup, link in rows:
        out["captures"] += n
        facts, dups, links = facts + f, dups + dup, links + link
        if status == "rejected":
            rejected[gate] = rejected.get(gate, 0) + n
        else:
            out[status] += n
    protos = noise.load(conn)
    return {
        **out,
        "rejected": rejected,
        "facts_stored": facts,
        "fact_duplicates": dups,
        "fact_links": links,
        "noise_prototypes": len(protos.centroids),
        "noise_version": protos.version,
        "noise_rejections_seen": protos.rejections,
    }
