"""`pai bench seq-length`: passages embedded at fewer word pieces, on real HotpotQA items."""

import json
import subprocess
import sys

import pytest

from eval.bench.seq_length import run
from eval.evaluate import load_items, similarity_ranking
from retrieval.metrics import recall_at_k


def test_the_reference_length_ties_itself_and_the_model_is_restored(benchmark_dir, embedder):
    items = load_items(benchmark_dir / "hotpotqa" / "dev.jsonl", 6)
    stored = embedder.max_seq_length
    r = run(items, embedder, [256, 16])
    assert embedder.max_seq_length == stored
    same, short = r["rows"]
    assert (same["diff"], same["ci95_low"], same["ci95_high"]) == (0.0, 0.0, 0.0)
    assert short["passages_truncated"] > 0.9 and same["passages_truncated"] < short["passages_truncated"]
    sims = [similarity_ranking(embedder, it) for it in items]  # what evaluate ranks by: the stored length
    assert same["recall@5"] == round(
        sum(recall_at_k(set(it["relevant_ids"]), s, 5) for it, s in zip(items, sims)) / 6, 4
    )
    with pytest.raises(ValueError, match="each once"):
        run(items, embedder, [128, 128])
    assert r["passages"] == len({c["text"] for it in items for c in it["candidates"]}) and r["queries"] == 6
    assert all(row["passages_per_s"] > 0 for row in r["rows"])


def test_cli_bad_input_is_one_line(tmp_path, benchmark_dir):
    cli = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "cli.main", "bench", "seq-length", *a], capture_output=True, text=True, timeout=120
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
