"""`pai lab loop trial`'s retrain step: the loop's log trained on by the real `train_ranker.train` (HotpotQA train
questions served by the first stage, a consumer citing in context), the ranker served on the loop's vectors."""

import json
import random
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.lab.loop_trial import embed, first_stage, trainer
from cli.main import app
from eval.bench.loop_trial import flipped, serve
from eval.bench.trial_power import Consumer
from eval.items import checked_items
from retrieval.contracts.metrics import recall_at_k
from retrieval.params import SearchParams, load_section
from training.train_ranker import CONFIG_FILE, METRICS_FILE

PARAMS = Path(__file__).resolve().parents[3] / "params.yaml"


@pytest.fixture(scope="module")
def served(benchmark_dir, embedder):
    items = [{**it, "domain": "hotpotqa"} for it in checked_items(benchmark_dir / "hotpotqa" / "train.jsonl", 100)]
    vectors = embed(items, embedder)
    first = first_stage(items, vectors, load_section(PARAMS, "search", SearchParams))
    records, _ = serve(items, first, first, Consumer(), 5, 0.05, random.Random(0), 1)
    return items, vectors, first, records


def recall(items, orders):
    return float(np.mean([recall_at_k(set(it["relevant_ids"]), orders[it["qid"]], 5) for it in items]))


@pytest.mark.slow  # the embedder and two real trainings: 13 min on the loaded 2-core box
def test_the_log_round_trips_through_train_ranker_and_the_flipped_one_ranks_otherwise(served, tmp_path):
    items, vectors, first, records = served
    train = trainer(PARAMS, vectors, tmp_path)
    good, bad = train(records)(items), train(flipped(records))(items)
    assert not list(tmp_path.rglob("*.jsonl"))  # the log went to train_ranker in memory, no file
    m = json.loads((tmp_path / "ranker1" / METRICS_FILE).read_text())
    cfg = json.loads((tmp_path / "ranker2" / CONFIG_FILE).read_text())
    assert m["train_queries"] > 25 and m["val_queries"] > 5 and cfg["input_format"].startswith("ranker-input/")
    assert all(sorted(good[q]) == sorted(first[q]) for q in first)  # every candidate ranked, nothing else
    # labels turned over train another ranker (not a worse one by much: a shown chunk still beats the unshown
    # ones in the softmax over all candidates, so exposure keeps teaching the first stage's order)
    assert bad != good and abs(recall(items, good) - recall(items, first)) < 0.2


def test_bad_arguments_are_one_line_before_anything_loads():
    r = CliRunner().invoke(app, ["lab", "loop", "trial", "--domain", "scifact,nope", "--params", str(PARAMS)])
    assert r.exit_code == 2 and "--domain among scifact, hotpotqa, code" in r.output
    r = CliRunner().invoke(app, ["lab", "loop", "trial", "--cycles", "0", "--params", str(PARAMS)])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    for merge in ("team-draft,agreed_first", "team-draft\x00", "x" * 10_000, ","):  # look-alike, NUL, huge, none
        for command in (["lab", "loop", "trial"], ["lab", "trial"]):  # the on-policy loop and the power simulation
            r = CliRunner().invoke(app, [*command, "--merge", merge, "--params", str(PARAMS)])
            assert r.exit_code == 2 and "--merge: one or more of agreed-first, team-draft, union" in r.output
            assert len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["lab", "trial", "--previews", "-1", "--params", str(PARAMS)])
    assert r.exit_code == 2 and r.output.strip() == "error: --previews: 0 or more"


def test_the_params_it_reads_load():
    from retrieval.contracts.interleaving import TrialParams

    assert load_section(PARAMS, "trial", TrialParams).max_judged >= 1
