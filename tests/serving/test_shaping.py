"""Shaping a conversation's context (serving/shaping.py): literal candidates in, literal order out."""

from pathlib import Path

from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from retrieval.chunking import approx_tokens
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import Candidate
from serving.picker import Picker
from serving.selectors import SimilaritySelector
from serving.service import run_query
from serving.shaping import fill, trim


def cand(rank: int, session: int | None, tokens: int = 100, source: str = "chat.md") -> Candidate:
    head = f"[2023-05-0{session} 10:00 · session {session} · Ann, Bob]\n" if session else "# A note\n"
    return Candidate(rank, 100 + rank, source, None, None, 1, 2, f"{head}Ann: turn {rank}", "", 0.9, tokens)


def test_fill_tops_a_conversation_context_up_to_the_tokens():
    shown = [cand(1, 1, 300), cand(2, 1, 300), cand(3, 2, 300), cand(4, 3, 200), cand(5, 4, 30)]
    assert [c.rank for c in fill(shown[:1], shown, 830)] == [1, 2, 4, 5]  # 3 would pass 830: skipped
    assert [c.rank for c in fill(shown[:2], shown, 700)] == [1, 2, 5]
    assert fill(shown[:1], shown, 0) == shown[:1]


def test_notes_are_never_added_nor_filled():
    notes = [cand(i, None) for i in range(1, 6)]
    assert fill(notes[:3], notes, 1000) == notes[:3]  # a note-led context stays the selector's
    mixed = [cand(1, 1), cand(2, None), cand(3, 2)]
    assert [c.rank for c in fill(mixed[:1], mixed, 1000)] == [1, 3]  # a conversation's context takes no note


def test_the_picker_serves_the_filled_context():
    shown = [cand(i, i, 80) for i in range(1, 15)]
    for tokens, ranks in ((500, [1, 2, 3, 4, 5, 6]), (0, [1, 2, 3, 4, 5])):
        picker = Picker(SimilaritySelector(), conversation_tokens=tokens)
        try:
            served = picker.serve("what did Ann say?", shown, inline=True)
        finally:
            picker.close()
        assert [c.rank for c in served.context] == ranks


def chat(rank: int, session: int, turns: list[str], source: str = "chat.md") -> Candidate:
    text = f"[2023-05-0{session} 10:00 · session {session} · Ann, Bob]\n" + "\n".join(turns)
    return Candidate(rank, 100 + rank, source, None, None, 1, 2, text, "", 0.9, approx_tokens(text))


WINDOW = [
    "Ann: We went to the beach on Saturday.",
    "Bob: How was it?",
    "Ann: Windy. I lost my red kite over the dunes.",
    "Bob: Oh no!\n\nDid you find it? Ann: that is a quote, not a turn",
    "Ann: No, a gull took it.",
]


def test_trim_keeps_the_header_and_the_best_turn_grown_toward_its_better_neighbour():
    c = chat(1, 1, WINDOW)
    other = chat(2, 2, ["Ann: The kite festival is in June.", "Bob: Let us go."])
    cut = trim("where did Ann lose the kite?", [c, other], 2)
    lines = cut[c.chunk_id].text.split("\n")
    assert lines[0] == "[2023-05-01 10:00 · session 1 · Ann, Bob]"  # the dated header stays
    assert "Ann: Windy. I lost my red kite over the dunes." in lines and len(cut[c.chunk_id].text) < len(c.text)
    assert cut[c.chunk_id].tokens == approx_tokens(cut[c.chunk_id].text)
    assert other.chunk_id not in cut  # two turns already: nothing to trim
    three = trim("did Bob find the kite?", [c], 3)[c.chunk_id].text
    assert "Bob: Oh no!\n\nDid you find it? Ann: that is a quote, not a turn" in three  # a turn never split
    assert three.count("\n") == 3 + 2  # header + 3 turns, one of two paragraphs


def test_a_question_s_own_words_pick_no_turn_and_its_answer_comes_first():
    window = ["Bob: Bob here, Bob says hi to Bob.", "Ann: Which kite did you fly?", "Bob: The red one, from Lisbon."]
    c = chat(1, 1, window + ["Ann: Lovely."])
    assert trim("which kite did Bob fly?", [c], 2)[c.chunk_id].text.split("\n")[1:] == window[1:]
    assert trim("what did you do?", [c], 1) == {}  # only asking words: nothing to match, the chunk stays whole


def test_trim_leaves_notes_and_chunks_that_match_no_query_word_whole():
    c, note = chat(1, 1, WINDOW), cand(2, None)
    assert trim("quantum chromodynamics", [c, note], 1) == {}
    assert trim("", [c], 1) == {} and trim("kite", [note], 1) == {}
    assert trim("kite\x00" * 10_000, [c], 1)[c.chunk_id].text.count("\n") == 1  # hostile query: still one turn


def test_fill_with_turns_fits_more_windows_into_the_same_tokens():
    shown = [
        chat(i, i % 9 + 1, [f"Ann: small talk number {i} " * 3, f"Bob: the kite story {i}", "Ann: " + "x" * 90])
        for i in range(1, 21)
    ]
    whole = fill(shown[:5], shown, 400, "kite story", 0)
    cut = fill(shown[:5], shown, 400, "kite story", 1)
    assert len(cut) > len(whole) and sum(c.tokens for c in cut) <= 400
    assert cut[:5] == shown[:5]  # the selector's pick stays whole: only what the fill adds is trimmed
    assert all(c.text.startswith("[2023-05-0") and c.text.count("\n") == 1 and "kite story" in c.text for c in cut[5:])
    assert [c.rank for c in cut] == list(range(1, len(cut) + 1))  # the order stays the first stage's
    notes = [cand(i, None) for i in range(1, 6)]
    assert fill(notes[:3], notes, 1000, "turn", 1) == notes[:3]  # a note-led context: untouched


CHAT = """# Session 1 — 2023-05-08 13:56

Ann: I adopted a greyhound called Biscuit from the shelter last week.

Bob: Lovely! How is Biscuit settling in?

Ann: He sleeps all day and sprints at dusk, a typical greyhound.

Bob: My cousin has a whippet, same habits.

# Session 2 — 2023-06-01 09:00

Bob: My pottery class made bowls; mine cracked in the kiln.

Ann: Kilns are brutal. Did you glaze it first?

Bob: Yes, a blue glaze. Next term we try teapots.

Ann: Teapots sound hard, the spouts crack too.
"""


def serve_both(db_url, embedder, tmp_path, similarity_service, queries):
    """Each query served by a picker that keeps whole chunks and one that trims to one turn: the bodies."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "chat.md").write_text(CHAT)
    (tmp_path / "notes" / "bees.md").write_text("# Bees\n\nHoney bees store nectar as honey in wax combs.\n")
    with connect(db_url) as conn:
        ingest_paths(conn, [tmp_path / "notes"], IngestParams(conversation_window=30), SearchParams(), embedder)
    out = {}
    for turns in (0, 1):
        service = similarity_service(
            Picker(SimilaritySelector(), k=1, min_chunks=1, conversation_tokens=600, conversation_turns=turns)
        )
        service.pool = ConnectionPool(
            db_url, min_size=1, max_size=2, open=True, kwargs={"autocommit": True}, configure=register_vector
        )
        try:
            out[turns] = [run_query(service, q, inline=True) for q in queries]
        finally:
            service.pool.close()
            service.keyword_workers.shutdown()
            service.picker.close()
    return out


def test_the_service_serves_trimmed_dated_turns_and_stages_the_whole_chunks(
    db_url, embedder, tmp_path, similarity_service
):
    bodies = serve_both(db_url, embedder, tmp_path, similarity_service, ["which glaze did Bob choose?"])
    whole, cut = bodies[0][0], bodies[1][0]
    assert [c["chunk_id"] for c in cut["context"]] == [c["chunk_id"] for c in whole["context"]]
    assert cut["context"][0] == whole["context"][0] and "blue glaze" in cut["context"][0]["text"]  # the pick: whole
    added = cut["context"][1]  # the fill's: session 1 cut to the one turn that names Bob, under its dated header
    assert added["text"].startswith("[2023-05-08 13:56 · session 1 · ") and added["text"].count("\n") == 1
    assert "\nBob: " in added["text"] and set(added["text"].split("\n")) <= set(whole["context"][1]["text"].split("\n"))
    staged = Path(cut["staging_file"]).read_text()
    assert all(line in staged for c in cut["context"] for line in c["text"].split("\n"))  # what was served


def test_a_note_led_context_is_the_same_trimmed_or_not(db_url, embedder, tmp_path, similarity_service):
    bodies = serve_both(db_url, embedder, tmp_path, similarity_service, ["how do honey bees store nectar?"])
    assert bodies[1][0]["context"][0]["text"].startswith("# Bees")
    assert [(c["chunk_id"], c["text"]) for c in bodies[1][0]["context"]] == [
        (c["chunk_id"], c["text"]) for c in bodies[0][0]["context"]
    ]
