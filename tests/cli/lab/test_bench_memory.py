"""`pai lab bench memory` as a user runs it (a subprocess, a real Postgres, the real MiniLM): a tiny LoCoMo-shaped
conversation ingested as chat logs and as a transcript, asked through the service's query path, scored; bad input
is one line."""

import json
import os
import subprocess
import sys

import pytest

from tests.eval.bench.test_memory import CONV


def cli(tmp_path, db_url, *a, command="memory", timeout=300):
    (tmp_path / "conv-1.json").write_text(json.dumps(CONV))
    env = os.environ | {"DATABASE_URL": db_url, "PAI_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "cli.main", "lab", "bench", command, "--data-dir", str(tmp_path), *a]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_bad_input_is_one_line(tmp_path, db_url):
    in_sample = ["--conversations", "conv-1", "--learn-from", "conv-1"]  # a ranker is never scored on what it learned
    for bad in (["--conversations", "conv-9"], ["--format", "csv"], ["--dataset", "msc"], in_sample):
        out = cli(tmp_path, db_url, *bad)
        assert out.returncode != 0 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    for bad in (["--conversations", "conv-9"], ["--dataset", "msc"]):
        out = cli(tmp_path, db_url, *bad, command="memory-orders")
        assert out.returncode != 0 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_conversation_is_ingested_served_and_scored(tmp_path, db_url):
    for fmt in ("markdown", "jsonl"):
        good = cli(tmp_path, db_url, "--conversations", "conv-1", "--format", fmt, "--json")
        assert good.returncode == 0, good.stderr
        r = json.loads(good.stdout)
        served = r["systems"]["served"]
        assert (r["questions"], r["dropped_evidence"], served["dated_share"]) == (3, 1, 1.0)
        assert 0.5 <= served["recall"] <= 1 and served["adversarial_questions"] == 1  # under threshold: never shown
        assert set(r["systems"]) == {"served", "top20_candidates", "bm25_turns", "minilm_turns"}
        assert r["systems"]["top20_candidates"]["recall"] >= served["recall"]
        assert r["answers"] == {}  # no reader unless asked


@pytest.mark.slow
def test_the_reader_answers_from_each_context_and_from_the_evidence_alone(tmp_path, db_url):
    out = cli(tmp_path, db_url, "--conversations", "conv-1", "--reader-questions", "2", "--json", timeout=900)
    assert out.returncode == 0, out.stderr
    a = json.loads(out.stdout)["answers"]
    # the first two questions with a gold answer, read by the packaged model from every context and the ceiling
    assert a["reader"].startswith("llamacpp:SmolLM2") and a["queries"] == 2
    assert set(a["systems"]) == {"served", "bm25_turns", "minilm_turns", "ceiling"}
    assert all(0 <= m["em"] <= m["f1"] <= 1 for m in a["systems"].values())
    assert "served_vs_bm25_turns" in a["paired_f1"] and "served_vs_ceiling" not in a["paired_f1"]


@pytest.mark.slow
def test_orders_are_replayed_and_the_served_one_scores_as_the_service(tmp_path, db_url):
    served = json.loads(cli(tmp_path, db_url, "--conversations", "conv-1", "--json").stdout)["systems"]["served"]
    out = cli(tmp_path, db_url, "--conversations", "conv-1", "--json", command="memory-orders")
    assert out.returncode == 0, out.stderr
    orders = json.loads(out.stdout)["systems"]
    assert set(orders) == {"served", "cosine", "bm25", "rrf", "z_sum", "oracle"}
    assert orders["served"]["recall"] == served["recall"] and orders["served"]["tokens_mean"] == served["tokens_mean"]
