"""The cross-encoder's fusion at serving time: the fitted weights applied to its scores, positions and BM25."""

import pytest

from retrieval.contracts.learned_fusion import fuse_scores


def test_fuse_scores_applies_the_prior_by_position_and_bm25():
    fusion = {"ce_weight": 2.0, "rank_bias": [1.0, 0.5]}
    assert fuse_scores([0.1, 0.2, 0.3], fusion) == pytest.approx(
        [1.2, 0.9, 1.1]
    )  # positions past the last share its bias
    assert fuse_scores([0.1, 0.2], None) == [0.1, 0.2]
    with_bm25 = {**fusion, "bm25_weight": 0.5}
    assert fuse_scores([0.1, 0.2, 0.3], with_bm25, [1.0, 0.0, -1.0]) == pytest.approx([1.7, 0.9, 0.6])
    with pytest.raises(ValueError, match="lexical"):
        fuse_scores([0.1], with_bm25)
