"""The lexical-mismatch benchmark builder: documented functions become (docstring -> body without it)."""

import pytest

from eval.code_bench import build, first_sentence, functions

SOURCE = '''
def parse_duration(text):
    """Turn a human duration such as 1h30m into a number of seconds. More words here.

    Args: text.
    """
    total = 0
    for part in text.split():
        total += int(part)
    return total


def _private(x):
    """Hidden helpers are not queries at all, whatever they say."""
    return x * 2 + 1 if x else x - 1


def short(x):
    """Too short."""
    return x


def wrong(x):
    """Return the reversed list of items from the given input sequence."""
    out = list(x)
    out.reverse()
    assert isinstance(out, list), "a list of the items"
    return out
'''


def test_functions_keep_public_documented_ones_with_the_docstring_removed(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(SOURCE)
    (pkg / "broken.py").write_text("def (:\n")  # a syntax error is skipped, not raised
    (pkg / "nul.py").write_bytes(b"x = 1\x00\n")
    got = {q: body for _, q, body in functions(pkg)}
    assert set(got) == {
        "Turn a human duration such as 1h30m into a number of seconds.",
        "Return the reversed list of items from the given input sequence.",
    }
    body = got["Turn a human duration such as 1h30m into a number of seconds."]
    assert body.startswith("def parse_duration(text):") and "human duration" not in body and "return total" in body
    assert first_sentence("One two.  Three.\n\nFour") == "One two."


def test_build_refuses_a_tree_without_enough_functions(tmp_path, embedder):
    with pytest.raises(ValueError, match="documented functions"):
        build(tmp_path, embedder, queries=5)
