"""The README's main job, end to end, in a fresh clone: `pai lab cycle` on a small slice of SciFact.

It clones the repository, so it tests what is committed (in CI: exactly the submission)."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval.evaluate import EvaluateParams
from eval.systems import BASELINES

REPO = Path(__file__).resolve().parents[3]


def scifact_slice(src: Path, dst: Path, n_train: int = 30, n_test: int = 10, others: int = 150) -> None:
    """Real SciFact, cut down: some train and test claims, their abstracts, and distractors."""
    (dst / "qrels").mkdir(parents=True, exist_ok=True)
    keep_docs, keep_queries = set(), set()
    for split, n in (("train", n_train), ("test", n_test)):
        rows = list(csv.DictReader(open(src / "qrels" / f"{split}.tsv"), delimiter="\t"))
        qids = list(dict.fromkeys(r["query-id"] for r in rows))[:n]
        rows = [r for r in rows if r["query-id"] in qids]
        keep_queries |= set(qids)
        keep_docs |= {r["corpus-id"] for r in rows}
        with open(dst / "qrels" / f"{split}.tsv", "w") as f:
            w = csv.DictWriter(f, ["query-id", "corpus-id", "score"], delimiter="\t")
            w.writeheader()
            w.writerows(rows)
    corpus = [json.loads(line) for line in open(src / "corpus.jsonl")]
    picked = [d for d in corpus if d["_id"] in keep_docs] + [d for d in corpus if d["_id"] not in keep_docs][:others]
    (dst / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in picked))
    queries = [json.loads(line) for line in open(src / "queries.jsonl")]
    (dst / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries if q["_id"] in keep_queries))


@pytest.mark.slow
def test_pai_cycle_in_a_fresh_clone(db_url, benchmark_dir, tmp_path):
    clone = tmp_path / "p"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    # the clone holds the judged sets compressed; SciFact, cut down, is laid where it unpacks (its files then
    # count as unpacked), and `pai lab cycle` unpacks the rest (HotpotQA as it is) before it starts
    bench = clone / "data" / "judged"
    assert not list(bench.rglob("*.jsonl"))  # nothing unpacked is committed
    scifact_slice(benchmark_dir / "scifact", bench / "scifact")
    params = (clone / "params.yaml").read_text().replace("lag_seconds: 5.0", "lag_seconds: 0.0")
    params = params.replace("  max_queries: 0 ", "  max_queries: 10 ")  # llm_max_queries is 4
    # a trial over 30 claims decides within a bounded number of cited queries, as the rule's own cap
    params = params.replace("  max_judged: 800 ", "  max_judged: 15 ")
    params = params.replace("  max_cited: 4000 ", "  max_cited: 60 ")  # and queries both serve alike end it too
    (clone / "params.yaml").write_text(params)
    venv_bin = Path(sys.executable).parent
    # a state folder of its own (no test runs in the developer's MLflow), sharing only the model cache
    # so the Qwen2 tokenizer is not fetched again
    home = tmp_path / ".pai"
    home.mkdir()
    (REPO / ".pai" / "cache").mkdir(parents=True, exist_ok=True)
    (home / "cache").symlink_to(REPO / ".pai" / "cache")
    # PATH without the venv, as the README's `.venv/bin/pai lab cycle` runs: dvc's stages must still find its python
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if Path(d) != venv_bin)
    env = os.environ | {"PAI_HOME": str(home), "DATABASE_URL": db_url, "PYTHONPATH": str(clone), "PATH": path}
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "lab", "cycle", "--cycles", "2", "--json"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(run.stderr[-6000:])  # the demo's lines, shown when an assertion below fails
    assert run.returncode == 0, run.stderr[-3000:]
    assert "unpacked 7 judged benchmark files" in run.stderr  # all but the slice's 4
    result = json.loads(run.stdout)
    assert result["ingest"]["documents_new"] >= 150
    cycles, day_one = result["cycles"], result["day_one"]
    assert day_one["served_by"] == "first-stage" and day_one["served"]["queries"] == 10
    assert day_one["queries_asked"] == 30  # its 10 claims asked in the default 3 passes, before the first retrain
    assert [c["cycle"] for c in cycles] == [1, 2] and [c["served"]["queries"] for c in cycles] == [10, 10]
    assert all(s["errors"] == 0 and s["previews"] > 0 for s in [day_one["served"], *(c["served"] for c in cycles)])
    assert cycles[0]["served_by"] == "first-stage" and cycles[1]["served_by"] == cycles[0]["champion"]
    for c in cycles:  # each retrain's challenger against general on SciFact test, then its trial's decision
        assert c["challenger"] and "scifact-test" in c["vs_general"]
        assert (c["trial"] is not None) == (c["deploy"] == "trial")
        if c["deploy"] == "trial":
            assert c["trial"]["status"] in ("promoted", "rejected", "stopped") and c["trial"]["queries_asked"] > 0
            assert c["trial"]["evidence"]["judged"] <= 15 or c["trial"]["status"] == "promoted"
            assert (c["champion"] == c["challenger"]) == (c["trial"]["status"] == "promoted")
    # the last retrain read day one's traffic and the first cycle's (and the passes its trial took)
    assert result["pipeline"]["feedback"]["queries"] >= 30 + (cycles[0]["trial"] or {}).get("queries_asked", 10)
    assert result["pipeline"]["dataset"]["train_examples"] > 0
    assert result["pipeline"]["train"]["profile"] == "cpu" and result["pipeline"]["train"]["steps"] > 0
    hotpot = result["pipeline"]["eval"]["hotpotqa/test"]["systems"]  # the ranker's chain: no LLM in it
    assert set(hotpot) == {*BASELINES, "ranker"}  # the baselines and the ranker
    hotpot_llm = result["pipeline"]["eval_llm"]["hotpotqa/test"]["systems"]  # the LLM's, after the ranker's deploy
    llm_queries = EvaluateParams().llm_max_queries  # the shipped params.yaml's (tests/test_params.py: the two agree)
    assert {*BASELINES, "selector"} <= set(hotpot_llm) and hotpot_llm["selector"]["queries"] == llm_queries
    assert hotpot_llm["selector"]["json_valid"] == 1.0  # the exported GGUF, run as served (grammar-constrained)
    # the base model as served, on the same queries: fine-tuned minus base and minus general, each with its CI
    assert hotpot_llm["base"]["queries"] == llm_queries and hotpot_llm["base"]["json_valid"] == 1.0
    for bench in ("hotpotqa/test", "scifact-test"):
        vs = result["pipeline"]["eval_llm"][bench]["paired_bootstrap"]
        assert {"selector_vs_base", "selector_vs_general"} <= set(vs)
        assert vs["selector_vs_base"]["ci95_low"] <= vs["selector_vs_base"]["ci95_high"]
    assert "base" not in result["pipeline"]["eval_llm"]["code-docstrings"]["systems"]  # llm_base_benchmarks
    assert {"build", "train", "export", "evaluate_llm", "deploy_llm"} <= set(cycles[-1]["stage_seconds"])
    assert (
        result["pipeline"]["export"]["pick_agreement"] >= 0.95
        and result["pipeline"]["export"]["served_parse_rate"] == 1.0
    )
    deploy, deploy_llm = result["pipeline"]["deploy"], result["pipeline"]["deploy_llm"]
    assert {c["kind"] for c in deploy["challengers"].values()} == {"ranker"}
    # the CPU LLM: registered with its metrics and gated like the ranker (a 135 M selector fails the gate)
    assert {c["kind"] for c in deploy_llm["challengers"].values()} == {"llm"} and deploy_llm["not_registered"] == {}
    assert deploy_llm["version"].startswith("pai-selector:") and (deploy_llm["passed_gate"] or deploy_llm["reasons"])
    if not deploy_llm["passed_gate"]:  # a trial still running keeps `challenger` for the one on trial
        assert deploy_llm["alias"] == ("challenger" if not deploy_llm.get("trial_running") else None)
    if deploy["passed_gate"]:  # the LLM's chain ran after the ranker's deploy: the champion it met is that ranker
        assert "champion" in hotpot_llm
    assert deploy["version"].startswith("pai-selector:") and deploy["alias"] in ("champion", "challenger")
    assert deploy["passed_gate"] == bool(deploy.get("trial")) or deploy["alias"] == "champion"
    assert deploy["passed_gate"] or deploy["reasons"]
    # the service the cycles ran beside: a challenger its trial promoted was hot-swapped into it
    served = result["service"]
    promoted = [c for c in cycles if (c["trial"] or {}).get("status") == "promoted"]
    assert served["before"] == "first-stage" and served["swapped"] == bool(promoted)
    # a promoted champion read as its users get it at the end: with what the whole log cited, on every judged set
    now = result.get("champion_now")
    assert (now is not None) == served["swapped"]
    if now:
        assert now["version"] == served["after"] and "scifact-test" in now["sets"]
        assert all(
            s["queries"] > 0 and s["vs_general"]["ci95_low"] <= s["vs_general"]["ci95_high"]
            for s in now["sets"].values()
        )
    assert [r["queries"] for r in result["retrieval"]] == [10, 10]
    assert (clone / "dvc.lock").exists() and (clone / "data" / "datasets" / "train.jsonl").exists()
    assert (home / "mlflow.db").exists()  # the training run was tracked, in the test's own store
