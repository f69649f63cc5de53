"""The promotion gate on literal evaluate results: beat the reference with the CI above 0, keep answer
quality and JSON validity; the reference is the champion when there is one, else the best baseline."""

from eval.deploy import DeployParams, gate


def row(recall, answer=0.8, valid=1.0):
    return {"recall@5": recall, "answer_in_context": answer, "json_valid": valid}


def result(selector, ci, champion=None, **baselines):
    systems = {"similarity": row(0.6), "bm25": row(0.7), "hybrid": row(0.72), **baselines, "selector": selector}
    ref = "champion" if champion else max(("similarity", "bm25", "hybrid"), key=lambda b: systems[b]["recall@5"])
    if champion:
        systems["champion"] = champion
    diff = round(selector["recall@5"] - systems[ref]["recall@5"], 4)
    return {"systems": systems, "paired_bootstrap": {f"selector_vs_{ref}": {"recall@5_diff": diff, "ci95_low": ci[0], "ci95_high": ci[1]}}}


def test_first_time_the_best_baseline_is_the_bar():
    d = gate({"hotpotqa/test": result(row(0.80), (0.03, 0.13))}, DeployParams())
    assert d.passed and d.reasons == [] and d.details["hotpotqa/test"]["reference"] == "hybrid"
    d = gate({"hotpotqa/test": result(row(0.80), (-0.01, 0.13))}, DeployParams())  # better on average, CI spans 0
    assert not d.passed and "CI above 0" in d.reasons[0]
    d = gate({"hotpotqa/test": result(row(0.80), (0.03, 0.13))}, DeployParams(margin=0.1))  # +0.08 < margin 0.1
    assert not d.passed and "margin 0.1" in d.reasons[0]


def test_with_a_champion_it_is_the_bar_and_regressions_block():
    champ = row(0.85)
    assert not gate({"b": result(row(0.80), (-0.1, 0.0), champion=champ)}, DeployParams()).passed
    assert gate({"b": result(row(0.90), (0.01, 0.09), champion=champ)}, DeployParams()).passed
    d = gate({"b": result(row(0.90, answer=0.70), (0.01, 0.09), champion=champ)}, DeployParams())
    assert not d.passed and "answer in context 0.7000 < champion's 0.8000" in d.reasons[0]
    d = gate({"b": result(row(0.90, valid=0.95), (0.01, 0.09), champion=champ)}, DeployParams())
    assert not d.passed and "JSON-valid" in d.reasons[0]
    assert gate({"b": result(row(0.90, valid=0.99), (0.01, 0.09), champion=champ)}, DeployParams()).passed  # within tolerance


def test_every_gated_benchmark_must_pass_and_missing_results_fail():
    good, bad = result(row(0.80), (0.03, 0.13)), result(row(0.70), (-0.05, 0.01))
    d = gate({"a": good, "b": bad}, DeployParams())
    assert not d.passed and len(d.reasons) == 1 and d.reasons[0].startswith("b:")
    assert gate({"a": good, "b": bad}, DeployParams(benchmarks="a")).passed
    assert not gate({"a": good}, DeployParams(benchmarks="a,c")).passed
    assert gate({}, DeployParams()).reasons == ["no benchmark results to gate on"]


def test_each_challenger_is_gated_by_its_own_system_name():
    r = result(row(0.70), (-0.05, 0.01))
    r["systems"]["cross_encoder"] = row(0.85)
    r["paired_bootstrap"]["cross_encoder_vs_hybrid"] = {"recall@5_diff": 0.13, "ci95_low": 0.08, "ci95_high": 0.18}
    assert not gate({"b": r}, DeployParams()).passed
    d = gate({"b": r}, DeployParams(), "cross_encoder")
    assert d.passed and d.details["b"]["recall@5"] == 0.85
