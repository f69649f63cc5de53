"""The scope grammar (retrieval/scopes.py): names and patterns, and the hostile ones refused in one line."""

import pytest

from retrieval.scopes import DEFAULT, ScopeError, check, check_pattern, matches


@pytest.mark.parametrize("name", ["default", "alice", "alice/notes", "team-a/proj_1/v2.0", "a" * 64, "0/1/2"])
def test_names_in_the_grammar_pass(name):
    assert check(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Alice",  # upper case
        "alice/",  # empty segment
        "/alice",
        "alice//notes",
        "..",
        "alice/..",
        "alice/./notes",
        ".hidden",
        "a/b/c/d",  # four segments
        "a\x00b",  # NUL
        "a" * 65,
        "x" * 10_000,
        "\u0430lice",  # Cyrillic а
        "alice\uff0fnotes",  # fullwidth solidus
        "alice notes",
        "alice\\notes",
        "alice/*",  # a pattern is not a name
        "é",
    ],
)
def test_hostile_names_are_refused_in_one_short_line(name):
    with pytest.raises(ScopeError) as e:
        check(name)
    message = str(e.value)
    assert "\n" not in message and len(message) < 300 and "\x00" not in message


@pytest.mark.parametrize("value", [None, 3, ["alice"], b"alice", True])
def test_non_strings_are_refused(value):
    with pytest.raises(ScopeError, match="must be a string"):
        check(value)


def test_patterns_match_exactly_a_prefix_or_everything():
    assert check_pattern("*") == "*" and check_pattern("alice/*") == "alice/*" and check_pattern(DEFAULT) == DEFAULT
    assert matches("alice/*", "alice") and matches("alice/*", "alice/notes") and matches("alice/*", "alice/a/b")
    assert not matches("alice/*", "alicebob") and not matches("alice/*", "bob/alice")
    assert matches("*", "bob/x") and matches("team/shared", "team/shared") and not matches("team/shared", "team")
    for bad in ("a*", "*/x", "alice/**", "../*", "**"):
        with pytest.raises(ScopeError):
            check_pattern(bad)
