"""`pai lab bench`: the commands in front of the benchmark cores (cli/lab/bench_*.py), run as a user runs them (a
subprocess): bad input is one line and no traceback, a good run prints its result as JSON."""

import json
import subprocess
import sys

from eval.items import load_items
from eval.systems import BASELINES


def test_seq_length_bad_input_is_one_line(tmp_path, benchmark_dir):
    cli = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "cli.main", "lab", "bench", "seq-length", *a],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dev = str(benchmark_dir / "hotpotqa" / "dev.jsonl")
    for lengths in ("0", "128,x", "100000", "128,128"):
        bad = cli("--benchmark", dev, "--lengths", lengths)
        assert bad.returncode != 0 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    missing = cli("--benchmark", str(tmp_path / "nope.jsonl"))
    assert missing.returncode != 0 and "not found" in missing.stderr
    good = cli("--benchmark", dev, "--lengths", "256,64", "--max-queries", "2", "--json")
    assert good.returncode == 0, good.stderr
    assert [row["max_seq_length"] for row in json.loads(good.stdout)["rows"]] == [256, 64]


def test_general_bad_input_is_one_line_and_a_good_run_lists_every_system(tmp_path, benchmark_dir):
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "cli.main", "lab", "bench", "general", *a], capture_output=True, text=True, timeout=120
    )
    bad = run("--weights", "0,-1", "--benchmark", str(benchmark_dir / "hotpotqa" / "dev.jsonl"))
    assert bad.returncode != 0 and "each must be a number >= 0" in bad.stderr and "Traceback" not in bad.stderr
    bad = run("--sd-floor", "0,nan", "--benchmark", str(benchmark_dir / "hotpotqa" / "dev.jsonl"))
    assert bad.returncode != 0 and "--sd-floor" in bad.stderr and "Traceback" not in bad.stderr
    missing = run("--benchmark", str(tmp_path / "nope.jsonl"))
    assert missing.returncode != 0 and "not found" in missing.stderr and "Traceback" not in missing.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"qid": "1", "query": "q"}\n')  # no candidates
    out = run("--benchmark", str(broken), "--json")
    assert out.returncode != 0 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "item 1: needs query, candidates" in out.stderr
    not_object = tmp_path / "list.jsonl"
    not_object.write_text("[1, 2]\n")
    out = run("--benchmark", str(not_object))
    assert out.returncode != 0 and "not a JSON object" in out.stderr and "Traceback" not in out.stderr
    ok = tmp_path / "ok.jsonl"
    ok.write_text("".join(json.dumps(it) + "\n" for it in load_items(benchmark_dir / "hotpotqa" / "dev.jsonl", 3)))
    good = run("--benchmark", str(ok), "--weights", "0.5", "--sd-floor", "0,0.2", "--json")
    assert good.returncode == 0, good.stderr
    out = json.loads(good.stdout)
    assert "cores" in out.pop("machine")  # every figure beside the machine it was measured on
    (result,) = out.values()
    assert result["queries"] == 3
    rows = result["rows"]
    assert [r["system"] for r in rows] == [
        *BASELINES,  # the baseline table's, then the fusions asked for
        "cos + 0.5 bm25",
        "cos + 0.5 bm25 (sd floor 0.2)",
    ]


def test_build_man_says_in_one_line_when_there_is_no_manual(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "lab", "bench", "build-man", "--man-root", str(tmp_path / "none")]
        + ["--out", str(tmp_path / "m.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr and not (tmp_path / "m.jsonl").exists()
    assert (
        run.stderr.strip().splitlines()[-1]
        == f"error: only 0 usable manual pages under {tmp_path / 'none'}: not a benchmark"
    )
