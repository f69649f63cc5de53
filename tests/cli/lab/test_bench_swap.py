"""`pai lab bench swap`'s moves of the champion, literal: promote the first version, then the second, then rollback
and promote in turn; fewer than two versions is refused before anything starts."""

import pytest

from cli.lab.bench_swap import plan, run


def test_the_moves_alternate_rollback_and_promote_after_the_first_two():
    assert plan(["1", "2"], 1) == [("promote", "1")]
    assert plan(["1", "2"], 5) == [
        ("promote", "1"),
        ("promote", "2"),
        ("rollback", None),
        ("promote", "2"),
        ("rollback", None),
    ]


def test_one_version_is_nothing_to_swap_between(tmp_path):
    with pytest.raises(ValueError, match="need two selector versions"):
        run(tmp_path / "params.yaml", ["a query"], ["first-stage"], clients=1, seconds=1.0, swaps=2)
