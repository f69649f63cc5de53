"""`pai lab bench seq-length`: passages embedded at fewer word pieces, on real HotpotQA items."""

import pytest

from eval.bench.seq_length import run
from eval.items import load_items
from eval.systems import cosine_ranking
from retrieval.contracts.metrics import recall_at_k


def test_the_reference_length_ties_itself_and_the_model_is_restored(benchmark_dir, embedder):
    items = load_items(benchmark_dir / "hotpotqa" / "dev.jsonl", 6)
    stored = embedder.max_seq_length
    r = run(items, embedder, [256, 16])
    assert embedder.max_seq_length == stored
    same, short = r["rows"]
    assert (same["diff"], same["ci95_low"], same["ci95_high"]) == (0.0, 0.0, 0.0)
    assert short["passages_truncated"] > 0.9 and same["passages_truncated"] < short["passages_truncated"]
    sims = [cosine_ranking(embedder, it) for it in items]  # what evaluate ranks by: the stored length
    assert same["recall@5"] == round(
        sum(recall_at_k(set(it["relevant_ids"]), s, 5) for it, s in zip(items, sims)) / 6, 4
    )
    with pytest.raises(ValueError, match="each once"):
        run(items, embedder, [128, 128])
    assert r["passages"] == len({c["text"] for it in items for c in it["candidates"]}) and r["queries"] == 6
    assert all(row["passages_per_s"] > 0 for row in r["rows"])
