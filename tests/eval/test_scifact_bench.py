"""The `benchmark` stage (eval/scifact_bench.py): SciFact's test claims as contract-5 items from this store's first stage."""


def test_scifact_benchmark_items_mark_chunks_of_relevant_abstracts():
    from eval.items import bench_name
    from eval.scifact_bench import items_from_search
    from retrieval.query.search import Candidate

    def search(claim):
        return [
            Candidate(
                r,
                100 + r,
                f"x/scifact/corpus.jsonl#{doc}",
                "Abstract",
                None,
                1,
                2,
                f"text {r}",
                f"h{r}",
                0.9 - r / 50,
                3,
            )
            for r, doc in enumerate(["7", "8", "7", "9"], start=1)
        ]

    items, stats = items_from_search([("q1", "claim one", {"7"}), ("q2", "claim two", {"42"})], search)
    assert stats == {"queries": 2, "items": 1, "no_relevant_candidate": 1, "candidates_mean": 4.0}
    (it,) = items
    assert it["relevant_ids"] == ["101", "103"] and [c["id"] for c in it["candidates"]] == ["101", "102", "103", "104"]
    assert bench_name("data/benchmarks/scifact-test.jsonl") == "scifact-test"
    assert bench_name("data/judged/hotpotqa/test.jsonl") == "hotpotqa/test"
