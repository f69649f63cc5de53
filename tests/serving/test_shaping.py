"""Shaping a conversation's context (serving/shaping.py): literal candidates in, literal order out."""

from retrieval.query.search import Candidate
from serving.picker import Picker
from serving.selectors import SimilaritySelector
from serving.shaping import diversify, expand, fill


def cand(rank: int, session: int | None, tokens: int = 100, source: str = "chat.md") -> Candidate:
    head = f"[2023-05-0{session} 10:00 · session {session} · Ann, Bob]\n" if session else "# A note\n"
    return Candidate(rank, 100 + rank, source, None, None, 1, 2, f"{head}Ann: turn {rank}", "", 0.9, tokens)


def test_a_session_keeps_cap_chunks_and_freed_slots_go_to_other_sessions():
    shown = [cand(1, 1), cand(2, 1), cand(3, 1), cand(4, 2), cand(5, 1), cand(6, 3)]
    assert [c.rank for c in diversify(shown[:4], shown, 2)] == [1, 2, 4, 6]
    assert [c.rank for c in diversify(shown[:4], shown, 1)] == [1, 4, 6]  # nothing else left: shorter
    assert diversify(shown[:4], shown, 0) == shown[:4]
    other = cand(3, 1, source="other.md")  # session 1 of another conversation is another session
    assert [c.rank for c in diversify([shown[0], shown[1], other], shown, 1)] == [1, 3, 4]


def test_notes_are_never_moved_nor_added():
    notes = [cand(i, None) for i in range(1, 6)]
    assert diversify(notes[:3], notes, 1) == notes[:3]
    assert fill(notes[:3], notes, 1000) == notes[:3]
    mixed = [cand(1, 1), cand(2, None), cand(3, 2)]
    assert [c.rank for c in fill(mixed[:1], mixed, 1000)] == [1, 3]


def test_fill_tops_a_conversation_context_up_to_the_tokens():
    shown = [cand(1, 1, 300), cand(2, 1, 300), cand(3, 2, 300), cand(4, 3, 200), cand(5, 4, 30)]
    assert [c.rank for c in fill(shown[:1], shown, 830)] == [1, 2, 4, 5]  # 3 would pass 830: skipped
    assert [c.rank for c in fill(shown[:1], shown, 830, cap=1)] == [1, 3, 4, 5]
    assert fill(shown[:1], shown, 0) == shown[:1]


def test_the_picker_serves_the_shaped_context():
    shown = [cand(i, 1 if i < 5 else i, 80) for i in range(1, 12)]
    picker = Picker(SimilaritySelector(), session_cap=2, conversation_tokens=500)
    try:
        served = picker.serve("what did Ann say?", shown, inline=True)
    finally:
        picker.close()
    assert [c.rank for c in served.context] == [1, 2, 5, 6, 7, 8]


def window(rank: int, session: int, start: int, end: int, source: str = "chat.md") -> Candidate:
    head = f"[2023-05-0{session} 10:00 · session {session} · Ann]\n"
    return Candidate(rank, 100 + rank, source, None, None, start, end, f"{head}Ann: turn {rank}", "", 0.9, 50)


def test_the_windows_next_to_a_strong_hit_follow_it():
    hit, before, after = window(1, 1, 11, 15), window(5, 1, 5, 9), window(7, 1, 17, 20)
    far, other_session, other_file = window(2, 1, 30, 34), window(3, 2, 17, 20), window(4, 1, 17, 20, "b.md")
    shown = [hit, far, other_session, other_file, before, window(6, 3, 1, 4), after]
    assert [c.rank for c in expand(shown, 1)] == [1, 5, 7, 2, 3, 4, 6]
    assert expand(shown, 0) == shown
