"""Benchmarks: one module per measurement, each named for what it measures (`embed`, `hnsw`, `ingest`,
`scrub`, `seq_length`, `general_fusion`, `usage_prior`, `halfvec_parity`), and two scripts
that run a measurement on two commits (`ingest_side_by_side.sh`, `main_job_side_by_side.sh`). Each
module is a pure core that `pai lab bench` calls (cli/lab/bench.py registers every bench); the benches that
start a service, run the extractor or span training and eval need the cli layer and sit there
(`cli/lab/bench_*.py`). The benchmark *sets* are built in eval/: the stages `scifact_bench` and
`code_bench`, `man_bench` and `provider_corpus`."""
