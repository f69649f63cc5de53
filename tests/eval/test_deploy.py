"""The promotion gate on literal evaluate results. In domain: beat the best baseline by the margin with
the CI above 0, and never trail the champion; out of domain: trail the best baseline by at most the
tolerance; answer quality and JSON validity kept everywhere."""

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from eval.deploy import challengers, deploy
from eval.gate import DeployParams, gate, judged
from eval.systems import BASELINES, chain_arg, chain_file

REPO = Path(__file__).resolve().parents[2]

P = DeployParams(in_domain="a", in_domain_guard="", out_of_domain="", margin=0.03)


def row(recall, answer=0.8, valid=1.0):
    return {"recall@5": recall, "answer_in_context": answer, "json_valid": valid}


def result(selector, ci, champion=None, champion_diff=None, **baselines):
    plain = {b: row(0.6) for b in BASELINES} | {"bm25": row(0.7), "general": row(0.71), "hybrid": row(0.72)}
    systems = {**plain, **baselines, "selector": selector}
    ref = max(BASELINES, key=lambda b: systems[b]["recall@5"])
    diff = round(selector["recall@5"] - systems[ref]["recall@5"], 4)
    versus = {f"selector_vs_{ref}": {"recall@5_diff": diff, "ci95_low": ci[0], "ci95_high": ci[1]}}
    if champion:
        systems["champion"] = champion
        versus["selector_vs_champion"] = {
            "recall@5_diff": champion_diff,
            "ci95_low": champion_diff - 0.05,
            "ci95_high": champion_diff + 0.05,
        }
    return {"systems": systems, "paired_bootstrap": versus}


def test_in_domain_the_best_baseline_plus_the_margin_is_the_bar():
    d = gate({"a": result(row(0.80), (0.03, 0.13))}, P)
    assert d.passed and d.reasons == [] and d.details["a"]["reference"] == "hybrid" and d.details["a"]["domain"] == "in"
    d = gate({"a": result(row(0.80), (-0.01, 0.13))}, P)  # better on average, CI spans 0
    assert not d.passed and "CI above 0" in d.reasons[0]
    d = gate({"a": result(row(0.74), (0.01, 0.03))}, P)  # +0.02 with the CI above 0, short of the 0.03 margin
    assert not d.passed and "margin 0.03" in d.reasons[0]


def test_out_of_domain_it_may_trail_by_the_tolerance_only():
    ood = DeployParams(in_domain="a", in_domain_guard="", out_of_domain="o", margin=0.03, ood_tolerance=0.02)
    good = result(row(0.80), (0.03, 0.13))
    assert gate({"a": good, "o": result(row(0.71), (-0.04, 0.02))}, ood).passed  # -0.01: within 0.02, CI irrelevant
    d = gate({"a": good, "o": result(row(0.69), (-0.06, 0.0))}, ood)  # -0.03
    assert not d.passed and d.reasons[0].startswith(
        "o (out of domain): recall@5 -0.0300 vs hybrid loses more than 0.02"
    )
    assert d.details["o"]["domain"] == "out"


def test_the_held_out_feedback_guards_against_a_regression_without_asking_for_a_margin():
    """Exposure labels (a consumer's citations, a few explored chunks) cannot prove +0.03; they can catch a loss."""
    guarded = DeployParams(in_domain="a", in_domain_guard="g", out_of_domain="", guard_tolerance=0.02)
    good = result(row(0.80), (0.03, 0.13))
    d = gate({"a": good, "g": result(row(0.73), (-0.03, 0.05))}, guarded)  # +0.01, CI spans 0: no margin needed
    assert d.passed and d.details["g"]["domain"] == "guard"
    d = gate({"a": good, "g": result(row(0.69), (-0.07, 0.01))}, guarded)  # -0.03
    assert not d.passed and d.reasons == ["g (held-out feedback): recall@5 -0.0300 vs hybrid loses more than 0.02"]
    champ = row(0.75)
    assert gate({"a": good, "g": result(row(0.74), (-0.03, 0.05), champion=champ, champion_diff=-0.01)}, guarded).passed
    d = gate({"a": good, "g": result(row(0.74), (-0.03, 0.05), champion=champ, champion_diff=-0.03)}, guarded)
    assert not d.passed and "vs the champion" in d.reasons[0]
    assert gate({"a": good}, guarded).reasons == ["g: no selector result"]  # no held-out feedback: not passed blind


def test_a_champion_must_not_be_trailed_and_quality_must_hold():
    champ = row(0.85)
    d = gate({"a": result(row(0.80), (0.03, 0.13), champion=champ, champion_diff=-0.05)}, P)
    assert not d.passed and "vs the champion" in d.reasons[0]
    assert gate({"a": result(row(0.90), (0.1, 0.2), champion=champ, champion_diff=0.05)}, P).passed
    d = gate({"a": result(row(0.90, answer=0.70), (0.1, 0.2))}, P)
    assert not d.passed and "answer in context 0.7000 < hybrid's 0.8000" in d.reasons[0]
    d = gate({"a": result(row(0.90, valid=0.95), (0.1, 0.2))}, P)
    assert not d.passed and "JSON-valid" in d.reasons[0]
    assert gate({"a": result(row(0.90, valid=0.99), (0.1, 0.2))}, P).passed  # within tolerance


def test_every_gated_benchmark_must_pass_and_missing_results_fail():
    good, bad = result(row(0.80), (0.03, 0.13)), result(row(0.70), (-0.05, 0.01))
    d = gate({"a": good, "b": bad}, DeployParams(in_domain="a,b", in_domain_guard="", out_of_domain=""))
    assert not d.passed and len(d.reasons) == 1 and d.reasons[0].startswith("b:")
    assert gate({"a": good, "b": bad}, P).passed  # b is not gated
    assert gate({"a": good}, DeployParams(in_domain="a,c", in_domain_guard="", out_of_domain="")).reasons == [
        "c: no selector result"
    ]
    assert DeployParams(in_domain="", promotion="judged").problems()  # a margin needs an in-domain split
    assert not DeployParams(in_domain="").problems()  # the default: a trial decides
    assert not DeployParams(in_domain="", promotion="auto").problems()  # auto: a trial where no judged split exists


def test_where_no_judged_split_speaks_for_the_store_a_trial_decides_and_the_guards_still_gate():
    """The user's own store: SciFact is not in it, so its in-domain split has no items (no result)."""
    auto = DeployParams(in_domain="a", in_domain_guard="", out_of_domain="o", promotion="auto")
    good_ood = result(row(0.80), (-0.01, 0.02))
    assert not judged({"a": good_ood, "o": good_ood}, replace(auto, promotion="trial"), "selector")  # the default
    assert not judged({"o": good_ood}, auto, "selector")  # no in-domain result: a trial
    assert judged({"a": good_ood, "o": good_ood}, auto, "selector")  # the lab's store: the margin
    assert not judged({"a": good_ood}, replace(auto, promotion="trial"), "selector")
    d = gate({"o": good_ood}, auto, by_margin=False)
    assert d.passed and set(d.details) == {"o"}  # the margin is not asked for; the out-of-domain guard is
    worse = result(row(0.69), (-0.05, -0.01))
    d = gate({"o": worse}, auto, by_margin=False)
    assert not d.passed and "out of domain" in d.reasons[0]  # a trial is earned by the label-free checks


def test_each_challenger_is_gated_by_its_own_system_name():
    r = result(row(0.70), (-0.05, 0.01))
    r["systems"]["ranker"] = row(0.85)
    r["paired_bootstrap"]["ranker_vs_hybrid"] = {"recall@5_diff": 0.13, "ci95_low": 0.08, "ci95_high": 0.18}
    assert not gate({"a": r}, P).passed
    d = gate({"a": r}, P, "ranker")
    assert d.passed and d.details["a"]["recall@5"] == 0.85


def test_the_cpu_profiles_llm_is_registered_unless_told_not_to(tmp_path):
    """On a CPU box the LLM (SmolLM2-135M) is registered and gated like any challenger; register_cpu_llm false keeps
    it evaluated only, and says why."""
    (tmp_path / "selector.json").write_text(json.dumps({"kind": "llm", "version": "v", "profile": "cpu"}))
    result = {"scifact-test": {"systems": {"selector": {}, "cosine": {}, "base": {}}}}
    p = DeployParams(export=str(tmp_path), ranker=str(tmp_path / "none"))
    assert list(challengers(p, result)) == ["selector"]  # the base model is a reference, never a challenger
    skipped: dict = {}
    assert challengers(replace(p, register_cpu_llm=False), result, skipped) == {} and "CPU" in skipped["selector"]
    (tmp_path / "selector.json").write_text(json.dumps({"kind": "llm", "version": "v", "profile": "gpu"}))
    assert "selector" in challengers(p, result)  # the GPU profile's 14B is a real challenger


def test_a_chain_names_its_own_result_files():
    assert chain_file("metrics/eval.json", "ranker") == Path("metrics/eval.json")
    assert chain_file("metrics/deploy.json", "llm") == Path("metrics/deploy-llm.json")
    with pytest.raises(ValueError, match="one of ranker, llm"):
        chain_file("metrics/eval.json", "ce")
    assert chain_arg([], "deploy") == "ranker" and chain_arg(["llm"], "deploy") == "llm"
    with pytest.raises(SystemExit) as e:
        chain_arg(["ce"], "deploy")
    assert e.value.code == 2


def test_the_llm_chain_on_cpu_told_not_to_register_writes_a_decision_and_registers_nothing(tmp_path):
    """deploy_llm after an evaluate_llm of the CPU profile's LLM, register_cpu_llm false: a decision that says why,
    no registry call."""
    export = tmp_path / "export"
    export.mkdir()
    (export / "selector.json").write_text(json.dumps({"kind": "llm", "version": "v", "profile": "cpu"}))
    (tmp_path / "eval-llm.json").write_text(json.dumps({"scifact-test": {"systems": {"selector": {}}}}))
    p = DeployParams(export=str(export), metrics=str(tmp_path), ranker=str(tmp_path / "none"), register_cpu_llm=False)
    out = deploy(p, chain="llm")
    assert out["alias"] is None and out["challengers"] == {} and "CPU profile" in out["not_registered"]["selector"]
    with pytest.raises(FileNotFoundError):  # the ranker's chain reads its own file, eval.json
        deploy(p)


def test_the_rankers_gate_never_waits_for_the_gguf():
    """`dvc repro deploy` runs the ranker's chain alone; the LLM's chain comes after the ranker's deploy."""

    def ancestors(stage: str) -> set[str]:
        dot = subprocess.run(
            [str(Path(sys.executable).with_name("dvc")), "dag", "--dot", stage],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return set(re.findall(r'^"([^"]+)";$', dot, re.M)) - {stage}

    assert {"train_ranker", "evaluate"} <= ancestors("deploy")
    assert not {"train", "export", "build"} & ancestors("deploy")
    assert {"export", "deploy", "evaluate_llm"} <= ancestors("deploy_llm")


def test_an_eval_json_written_before_the_cosine_baseline_was_renamed_gates_the_same():
    """The committed metrics/eval.json with the cosine baseline under its old name (`similarity`, before issue 59):
    read as named now, every system, pair and gate decision is the same."""
    from eval.systems import current_result

    text = (Path(__file__).parents[2] / "metrics" / "eval.json").read_text()
    new, old = json.loads(text), json.loads(text.replace('"cosine', '"similarity').replace('_cosine"', '_similarity"'))
    assert (
        "similarity" in old["scifact-test"]["systems"]
        and "similarity_vs_bm25" in old["scifact-test"]["paired_bootstrap"]
    )
    assert current_result(old) == new
    for system in ("ranker", "champion"):
        assert gate(current_result(old), DeployParams(), system) == gate(new, DeployParams(), system)
