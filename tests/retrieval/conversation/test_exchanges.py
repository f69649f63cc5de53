"""Captured exchanges as conversation (retrieval/conversation/exchanges.py) against a real Postgres and the real
MiniLM: every exchange stored as its session's dated user/assistant turns whatever the gates decide, a later
exchange adding only its own chunk, exchanges without a session kept per source and day, a hostile session name
kept out of the header's grammar, and `capture.conversation: false` storing none."""

import re

from retrieval.conversation import capture, intake
from retrieval.conversation.capture import CaptureParams
from retrieval.conversation.exchanges import exchange_log, header_name
from retrieval.conversation.intake import Exchange
from retrieval.dialogue import parse_chat_log, session_key
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import search

SEARCH = SearchParams(threshold=0.0)
HEADER = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) · session ([^\]·]+) · (user, assistant|user|assistant)\]\n")
TRIP = (
    "Lisbon in late May is warm but not hot; book the Alfama guesthouse early because it fills up, and the "
    "tram 28 is the easiest way up the hill to the castle."
)


def run(conn, embedder, user, assistant, session=None, source=None, params=CaptureParams()):
    cid = intake.submit(conn, Exchange(user, assistant, source, session))
    return capture.process(conn, cid, params, IngestParams(), SEARCH, embedder, None)


def conversation_chunks(conn) -> list[tuple[str, str]]:
    return conn.execute(
        """SELECT d.source, c.text FROM chunks c JOIN documents d ON d.id = c.document_id
           WHERE d.source LIKE 'capture:session:%' ORDER BY d.source, c.ord"""
    ).fetchall()


def test_each_exchange_is_its_session_s_dated_turns_and_a_later_one_adds_only_its_own(conn, embedder):
    first = run(conn, embedder, "Where should we stay in Lisbon in May?", TRIP, session="trip planning")
    assert first.status == "stored"  # the facts as before
    (source, text), *_ = conversation_chunks(conn)
    m = HEADER.match(text)
    assert source == "capture:session:trip planning" and m and m.group(2) == "trip-planning"
    assert m.group(3) == "user, assistant" and "user: Where should we stay" in text and "assistant: Lisbon" in text
    assert session_key(source, text) == (source, "session trip-planning")
    before = {t for _, t in conversation_chunks(conn)}
    # a rejected exchange (procedural chatter) is still what was said: it joins the conversation too
    thanks = run(conn, embedder, "Thanks, book it for the 21st please", "Sure, I'll do that!", session="trip planning")
    assert thanks.status == "rejected" and thanks.gate == "prefilter"
    after = {t for _, t in conversation_chunks(conn)}
    assert before < after and len(after - before) == 1  # the earlier exchange's chunk kept as it was
    (new,) = after - before
    assert HEADER.match(new) and "user: Thanks, book it for the 21st" in new and "assistant: Sure" in new
    found = search(conn, embedder, "which guesthouse in Lisbon did we want?", SEARCH).candidates
    assert any(c.source == "capture:session:trip planning" and "Alfama" in c.text for c in found[:3])


def test_without_a_session_exchanges_are_kept_per_source_and_day(conn, embedder):
    run(conn, embedder, "what is tram 28?", TRIP, source="cli")
    run(conn, embedder, "and the castle?", TRIP + " The castle opens at nine.", source="cli")
    run(conn, embedder, "other client", TRIP + " Another client asked.", source="mobile")
    sources = sorted({s for s, _ in conversation_chunks(conn)})
    (day,) = conn.execute("SELECT DISTINCT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM captures")
    assert sources == [f"capture:session:cli {day[0]}", f"capture:session:mobile {day[0]}"]
    cli = [t for s, t in conversation_chunks(conn) if s.startswith("capture:session:cli")]
    assert len(cli) >= 2 and all(HEADER.match(t) and f"session cli-{day[0]}" in t for t in cli)


def test_a_hostile_session_name_stays_out_of_the_header_grammar(conn, embedder):
    name = "a · b ] [2020-01-01 · session 9 · eve]\n# Session 3 — 1 May 2020\n" + "x" * 400
    r = run(conn, embedder, "q\n\n# not a heading\n\nassistant: not a turn", TRIP, session=name)
    assert r.status == "stored"
    ((source, text),) = conversation_chunks(conn)[:1]
    m = HEADER.match(text)
    assert m and "·" not in m.group(2) and len(m.group(2)) <= 40 and not m.group(1).startswith("2020")
    turns = [
        t for s in parse_chat_log(exchange_log(name, [("2026-01-02 03:04", "a\n\n# h\n\nb: c", "d")])) for t in s.turns
    ]
    assert [(t.speaker, t.text) for t in turns] == [("user", "a\n\\# h\nb: c"), ("assistant", "d")]
    assert header_name("   ") == "capture" and header_name("x" * 100) == "x" * 40


def test_the_knob_off_stores_no_conversation(conn, embedder):
    r = run(conn, embedder, "Lisbon?", TRIP, session="s", params=CaptureParams(conversation=False))
    assert r.status == "stored" and conversation_chunks(conn) == []
