"""The selection contract: literal prompts and parses, and fuzzed outputs that always parse or fall back."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.contracts.selection import (
    PROMPT_VERSION,
    PromptCandidate,
    Selection,
    choose,
    cut_to_tokens,
    output_schema,
    parse_selection,
    render_answer,
    render_messages,
)


def test_render_messages_literal():
    msgs = render_messages(
        "Why is the sky blue?",
        [
            PromptCandidate("/home/u/notes/a.md", "Optics", "Rayleigh scattering."),
            PromptCandidate("b.md", None, "x" * 40),
        ],
        k=1,
        chunk_tokens=5,
    )
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "numbered 1 to 2" in msgs[0]["content"] and "at most 1" in msgs[0]["content"]
    assert json.loads(msgs[0]["content"].split("JSON schema: ")[1]) == output_schema(2, 1)
    assert msgs[1]["content"] == (
        "Query: Why is the sky blue?\n\nCandidates:\n\n[1] notes/a.md — Optics\nRayleigh scattering.\n\n"
        "[2] b.md\n" + "x" * 20 + " …"
    )
    assert PROMPT_VERSION == "pai-select/2"


def test_cut_to_tokens():
    assert cut_to_tokens("short", 10) == "short"
    assert cut_to_tokens("a" * 100, 5) == "a" * 20 + " …"


def test_parse_valid_and_empty():
    assert parse_selection('{"selected": [3, 1]}', n=5) == Selection((3, 1), "ok")
    assert parse_selection('{"selected": []}', n=5) == Selection((), "ok")
    assert parse_selection(render_answer([2, 4]), n=5) == Selection((2, 4), "ok")


def test_parse_repairs():
    assert parse_selection('{"selected": [2, 2, 9, "3", 1.0]}', n=5) == Selection((2, 3, 1), "repaired", "dropped 2, 9")
    assert parse_selection('Sure! ```json\n{"selected": [4]}\n```', n=5) == Selection(
        (4,), "repaired", "JSON embedded in other text"
    )
    assert parse_selection('{"selected": [1,2,3,4,5,6,7]}', n=10) == Selection(
        (1, 2, 3, 4, 5), "repaired", "kept first 5 of 7"
    )
    assert parse_selection("[2, 1]", n=3) == Selection((2, 1), "repaired", "bare list instead of an object")


def test_parse_falls_back_to_first_stage_order():
    assert parse_selection("I think passage two.", n=8) == Selection((1, 2, 3, 4, 5), "fallback", "not JSON")
    assert parse_selection('{"picked": [1]}', n=3) == Selection((1, 2, 3), "fallback", "no 'selected' list")
    assert parse_selection('{"selected": [0, 99, true]}', n=3).status == "fallback"
    assert parse_selection("", n=0) == Selection((), "fallback", "not JSON")


@settings(max_examples=500, deadline=None)
@given(
    raw=st.one_of(
        st.text(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers(-5, 30) | st.floats() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=8) | st.dictionaries(st.sampled_from(["selected", "x"]), inner, max_size=3)
            ),
            max_leaves=20,
        ).map(json.dumps),
    ),
    n=st.integers(0, 20),
    k=st.integers(1, 8),
)
def test_any_output_parses_or_falls_back(raw, n, k):
    s = parse_selection(raw, n=n, k=k)
    assert s.status in ("ok", "repaired", "fallback")
    assert len(s.selected) <= k and len(set(s.selected)) == len(s.selected)
    assert all(1 <= i <= n for i in s.selected)
    if s.status == "fallback":
        assert s.selected == tuple(range(1, min(n, k) + 1)) and s.problem


@settings(max_examples=300, deadline=None)
@given(picks=st.lists(st.integers(1, 20), max_size=5, unique=True), n=st.integers(1, 20))
def test_every_canonical_answer_and_its_prefixes_are_accepted(picks, n):
    from retrieval.contracts.selection import answer_state

    picks = [p for p in picks if p <= n]
    text = render_answer(picks)
    assert answer_state(text, n, 5) == "done"
    assert all(answer_state(text[:i], n, 5) == "open" for i in range(len(text)))


def test_answer_state_rejects_what_the_contract_does_not_allow():
    from retrieval.contracts.selection import answer_state

    assert answer_state('{"selected": [0', 9) is None  # numbers start at 1
    assert answer_state('{"selected": [10', 9) is None  # over n
    assert answer_state('{"selected": [1, 2, 3', 9, k=2) is None  # more than k
    assert answer_state('{"selected": [1,2', 9) is None  # not the canonical ", "
    assert answer_state('{"selected": [1]} ', 9) is None  # nothing after the answer
    assert answer_state('{"picked": [', 9) is None


def test_digits_that_are_not_ascii_are_dropped_not_crashing():
    s = parse_selection('{"selected": ["²", "2", "٣"]}', n=5, k=5)  # superscript two, Arabic-Indic three
    assert s.selected == (2,) and s.status == "repaired"


def test_choose_is_one_path_for_the_service_and_evaluation():
    """A good answer is parsed; a crash or a timeout falls back to the first-stage order, and says which."""
    sel, failure = choose(lambda: '{"selected": [3, 1]}', 5, 2)
    assert (sel.selected, sel.status, failure) == ((3, 1), "ok", None)

    def crash() -> str:
        raise RuntimeError("model gone")

    def slow() -> str:
        raise TimeoutError

    sel, failure = choose(crash, 5, 2)
    assert (sel.selected, sel.status, failure) == ((1, 2), "fallback", "error") and "model gone" in sel.problem
    sel, failure = choose(slow, 5, 2, timeout_s=1.5)
    assert (sel.selected, failure) == ((1, 2), "timeout") and "1.5 s" in sel.problem
