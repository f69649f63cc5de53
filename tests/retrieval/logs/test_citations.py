"""Reading an answer's citations against the context shown: literal in, literal out."""

from retrieval.logs.citations import Recorded, read_citations, replaced_state

SHOWN = {1: True, 2: True, 3: False, 4: None}  # 3 was not in the context; 4 logged before exposure was recorded


def test_citations_label_only_what_was_shown():
    assert read_citations("[2] and [4], [3], [9], [2] again", SHOWN) == Recorded([2, 4], [3], [9], True)
    assert read_citations("no citations at all", SHOWN) == Recorded([], [], [], True)  # every shown one ignored
    assert read_citations("only [3] and [9]", SHOWN) == Recorded([], [3], [9], False)  # another context's answer


def test_replaced_is_what_changed_of_what_was_set():
    before = {"used_ranks": [2], "rating": 1, "answer": "a [2]", "correction": None}
    assert replaced_state(before, {"used_ranks": [2], "rating": 1, "answer": "a [2]", "correction": "c"}) == {}
    assert replaced_state(before, {"used_ranks": [3], "rating": -1, "answer": None, "correction": None}) == {
        "used_ranks": [2],
        "rating": 1,
    }
    assert replaced_state({"used_ranks": None, "rating": None}, {"used_ranks": [1], "rating": 1}) == {}
