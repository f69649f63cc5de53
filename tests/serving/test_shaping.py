"""Shaping a conversation's context (retrieval/query/shaping.py): literal candidates in, literal order out."""

from retrieval.query.search import Candidate
from retrieval.query.shaping import fill
from serving.picker import Picker
from serving.selectors import FirstStageSelector


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
        picker = Picker(FirstStageSelector(), conversation_tokens=tokens)
        try:
            served = picker.serve("what did Ann say?", shown, inline=True)
        finally:
            picker.close()
        assert [c.rank for c in served.context] == ranks
