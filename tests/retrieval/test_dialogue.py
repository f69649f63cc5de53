"""Conversations as chunks (retrieval/dialogue.py): literal chat logs in, literal chunks out."""

from pathlib import Path

from retrieval.dialogue import chunk_conversation, conversation_order, is_chat_log, parse_chat_log, parse_when

REPO = Path(__file__).resolve().parents[2]

LOG = """# Session 3 — 1:56 pm on 8 May, 2023

Caroline: I went to the LGBTQ support group yesterday and it was so powerful.

Melanie: Wow, that's great! What happened there at the group?

Caroline: People shared their transgender stories. It made me want to study counseling.

Melanie: That's amazing, Caroline.

# Session 4 — 2023-05-25 13:14

Melanie: We went camping at the beach last weekend. Did you ever camp?

Caroline: Not yet, but I would love to try it with friends this summer.

Melanie: Bye! Take care!
"""


def test_dates_in_the_forms_chat_logs_write_them():
    assert parse_when("Session 3 — 1:56 pm on 8 May, 2023") == "2023-05-08 13:56"
    assert parse_when("12:09 am on 13 September, 2023") == "2023-09-13 00:09"
    assert parse_when("2023-05-25T13:14:00Z") == "2023-05-25 13:14"
    assert parse_when("March 3, 2024") == "2024-03-03"
    assert parse_when("Session 7") is None and parse_when("31 February 2023") is None


def test_a_chat_log_is_told_from_a_note():
    assert is_chat_log(LOG)
    note = "# Meeting 2023-05-08\n\nNote: bring the slides.\n\nWe agreed to ship on Friday.\n\nTodo: call Bob."
    assert not is_chat_log(note)
    undated = LOG.replace("1:56 pm on 8 May, 2023", "the first").replace("2023-05-25 13:14", "the next")
    assert not is_chat_log(undated)  # turns, but no heading names a date: a note that quotes a dialogue
    for md in [*REPO.glob("docs/*.md"), REPO / "README.md"]:
        assert not is_chat_log(md.read_text(encoding="utf-8")), md


def test_every_chunk_says_when_which_session_and_who_and_no_turn_is_split():
    sessions = parse_chat_log(LOG)
    assert [(s.label, s.when, len(s.turns)) for s in sessions] == [
        ("session 3", "2023-05-08 13:56", 4),
        ("session 4", "2023-05-25 13:14", 3),
    ]
    chunks = chunk_conversation(LOG, 20, 200)
    assert [c.text.split("\n")[0] for c in chunks] == [
        "[2023-05-08 13:56 · session 3 · Caroline]",
        "[2023-05-08 13:56 · session 3 · Melanie, Caroline]",
        "[2023-05-25 13:14 · session 4 · Melanie, Caroline]",
    ]
    # the question keeps its answer; the sign-off rides with the window before it
    assert chunks[1].text.split("\n")[1:3] == [
        "Melanie: Wow, that's great! What happened there at the group?",
        "Caroline: People shared their transgender stories. It made me want to study counseling.",
    ]
    assert chunks[1].text.endswith("Melanie: That's amazing, Caroline.")
    assert chunks[2].text.endswith("Melanie: Bye! Take care!")
    for c in chunks:
        for line in c.text.split("\n")[1:]:
            assert line.startswith(("Caroline: ", "Melanie: ")) and line in LOG
    assert (chunks[1].start_line, chunks[1].end_line, chunks[1].heading) == (5, 9, "Session 3 — 1:56 pm on 8 May, 2023")


def test_a_giant_turn_is_cut_into_pieces_each_with_the_header():
    log = "# Session 1 — 2023-01-02\n\nAnn: " + "word " * 40_000 + "\n\nBob: ok then, that was a lot.\n"
    chunks = chunk_conversation(log, 160, 200)
    assert len(chunks) > 10 and all(c.text.startswith("[2023-01-02 · session 1 · Ann") for c in chunks)
    assert max(c.tokens for c in chunks) <= 2 * 200 + 20


def test_the_conversation_order_fuses_the_general_order_with_the_keyword_side():
    ids = [11, 12, 13, 14]  # the general order
    # 14 is the keyword side's first: 1/(30+4) + 1/(30+1) beats 11's 1/(30+1) alone
    assert conversation_order(ids, {14: 1, 13: 5}, 1.0, 30) == [14, 13, 11, 12]
    assert conversation_order(ids, {}, 1.0, 30) == ids  # no keyword side: the general order
    assert conversation_order(ids, {14: 1}, 0.01, 30) == ids  # a small weight moves nothing this far


def test_a_named_session_keeps_its_name_and_a_numbered_one_its_number():
    log = "# 2026-12-05 14:03 — Session trip-planning\n\nuser: where?\n\nassistant: Lisbon.\n"
    log += "\n# Session 3 — 8 May, 2023\n\nAnn: hi there\n\nBob: hello\n"
    assert [(s.label, s.when) for s in parse_chat_log(log)] == [
        ("session trip-planning", "2026-12-05 14:03"),
        ("session 3", "2023-05-08"),
    ]
