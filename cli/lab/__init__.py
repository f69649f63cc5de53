"""The lab, apart from the product: `pai lab` (group.py) and what it runs: the benchmarks (`pai lab bench`,
bench.py and bench_*.py, their cores in eval/bench/), the demo cycle on SciFact (cycle.py, cycle_steps.py), the
simulated consumer (replay.py, lab_feedback.py), the loops (loop.py, onpolicy.py, loop_trial.py), the teacher and
LLM studies (teacher.py, llm_study.py) and the capture benchmark's data (capture_data.py). The lab imports the
product; the product (the rest of cli/, retrieval, serving, training, eval) never imports the lab (tests/test_layers.py)."""
