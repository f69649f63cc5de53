"""Latency of the cross-encoder selector (`pai bench ce`): candidate sets from the shared benchmark, every call
timed, on the session's tiny trained model."""


def test_latency_bench_times_every_call_on_the_shared_benchmark(ce_model_dir, benchmark_dir):
    from eval.bench.ce import bench, hotpotqa_sets, scifact_sets

    hotpot, scifact = (
        hotpotqa_sets(benchmark_dir / "hotpotqa" / "test.jsonl", 3),
        scifact_sets(benchmark_dir / "scifact", 3),
    )
    for sets in (hotpot, scifact):
        assert len(sets) == 3 and all(len(c) == 20 for _, c in sets) and len({q for q, _ in sets}) == 3
        assert all(len({c.source for c in cands}) == 20 for _, cands in sets)
    row = bench(ce_model_dir, scifact, repeats=2, dtype="float32")
    assert (row["calls"], row["candidates"], row["layers"], row["max_length"], row["dtype"]) == (
        6,
        20,
        2,
        32,
        "float32",
    )
    assert 0 < row["p50_ms"] <= row["p95_ms"]
