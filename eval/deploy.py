"""Stages `deploy` and `deploy_llm`: register one chain's evaluated challengers in MLflow, gate them
(`eval.gate`), and promote the best one that earns it. The ranker's chain (`python -m eval.deploy`: the learned
ranker; `metrics/eval.json` -> `metrics/deploy.json`) never waits for the GGUF; the LLM's (`python -m eval.deploy
llm`: the exported selector; `eval-llm.json` -> `deploy-llm.json`) runs after it, so a promoted ranker is
the champion the LLM must not trail.

Passing the gate: alias `champion`, announced to the running services (hot-swap; a failed canary moves it back).
Where no judged split speaks for the store (`deploy.promotion`), passing the checks that need no user labels puts
it on a trial instead (`retrieval.contracts.interleaving`), unless one is still running.
Failing: alias `challenger`, and the stage says why. Either way `metrics/deploy.json` records it.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from retrieval.contracts.interleaving import TrialParams
from retrieval.db import connect, store_id
from retrieval.files import write_atomic
from retrieval.params import load_section
from serving.llm_selectors import OLLAMA_TEMPLATE, ollama_reachable

from . import promotion, registry
from .gate import GATED, DeployParams, gate, judged
from .registry import RegistryError, folder_record, has_model
from .systems import chain_arg, chain_file, current_result


def challengers(p: DeployParams, result: dict, skipped: dict | None = None) -> dict[str, dict]:
    """The evaluated challengers' version records, by eval system name; those left out, with why, into `skipped`."""
    out = {}
    evaluated = {s for r in result.values() for s in r["systems"]}
    if "selector" in evaluated and (Path(p.export) / "selector.json").exists():
        record = json.loads((Path(p.export) / "selector.json").read_text())
        if record.get("profile") == "cpu" and not p.register_cpu_llm:
            (skipped if skipped is not None else {})["selector"] = (
                "the CPU profile's LLM (SmolLM2-135M): evaluated to prove the path (export, GGUF, grammar), "
                "not registered (deploy.register_cpu_llm)"
            )
        else:
            out["selector"] = record
    if "ranker" in evaluated and has_model("ranker", Path(p.ranker)):
        out["ranker"] = folder_record("ranker", Path(p.ranker))
    return out


def deploy(p: DeployParams, log=print, chain: str = "ranker", trial: TrialParams | None = None) -> dict:
    """Register every challenger `chain`'s evaluate stage evaluated; the best one that passes the gate (by
    mean Recall@5 over the gated benchmarks) becomes champion, or, where no judged split speaks for the
    store (`judged`), enters a trial (`trial`) that the user's traffic decides; the best of the rest challenger."""
    evaluated = chain_file(Path(p.metrics) / "eval.json", chain)
    result = current_result(json.loads(evaluated.read_text()))  # an older one's baselines as named now
    skipped: dict[str, str] = {}
    records = challengers(p, result, skipped)
    out: dict = {"challengers": {}, "not_registered": skipped}
    if not records and skipped:  # evaluated, kept out of the registry on purpose (the CPU profile's LLM)
        return out | {"version": None, "system": None, "passed_gate": False, "alias": None, "reasons": []}
    if not records:
        raise RegistryError(f"no challenger in {evaluated} (run train_ranker or export, then evaluate)")
    for line in promotion.record_trials():  # trials that closed since the last run, into the registry first
        log(f"deploy: {line}")
    with connect() as conn:  # the store it was trained for: pull exported this database's log in the same run
        store = store_id(conn)
    ranked = []
    for system, record in records.items():
        decision = gate(result, p, system, by_margin=judged(result, p, system))
        metrics = {
            f"{b}/{m}": result[b]["systems"][system][m] for b in result if system in result[b]["systems"] for m in GATED
        }
        record = registry.register(
            {**record, "store": store}, {k.replace("@", "_at_"): v for k, v in metrics.items() if v is not None}
        )
        if record["kind"] == "llm":
            out["ollama"] = create_in_ollama(record, Path(p.export), log)
        recall = [d["recall@5"] for d in decision.details.values()]
        mean = round(sum(recall) / len(recall), 4) if recall else 0.0
        out["challengers"][system] = {
            "version": record["version"],
            "kind": record["kind"],
            "passed_gate": decision.passed,
            "decided_by": "margin" if judged(result, p, system) else "trial",
            "mean_recall@5": mean,
            "reasons": decision.reasons,
            "gate": decision.details,
        }
        ranked.append((decision.passed, mean, system, record))
    ranked.sort(key=lambda t: (t[0], t[1]), reverse=True)
    passed, _, best, record = ranked[0]
    out.update(version=record["version"], system=best, passed_gate=passed, reasons=out["challengers"][best]["reasons"])
    by_trial = out["challengers"][best]["decided_by"] == "trial"
    running = promotion.running_trial() if by_trial else None
    if passed and p.promote and by_trial and registry.same_model(registry.champion(store) or {}, record):
        out.update(alias="champion", trial=None)  # the champion again: nothing to try
    elif passed and p.promote and by_trial and running is not None:
        # a trial gathering evidence is not restarted by each retrain (it would never end): this one waits
        out.update(alias=None, trial=None, waiting_for=running.as_dict())
    elif passed and p.promote and by_trial:
        started = promotion.start_trial(record, trial or TrialParams())
        out.update(alias="challenger", trial=started.as_dict())
    elif passed and p.promote:
        moved = promotion.move_champion(record, "deploy", f"passed the gate ({best})", p.wait_s)
        out.update(alias="champion", deployment_id=moved.deployment_id, services=moved.services, swap_ms=moved.swap_ms)
        rest = [r for ok, _, s, r in ranked[1:]]
        if rest:
            promotion.set_challenger(rest[0])
    elif by_trial and (running := promotion.running_trial()) is not None:
        # the alias `challenger` names the one on trial (the ranker's, this same run): a failed LLM does not take it
        out.update(alias=None, trial_running=running.as_dict())
    else:
        promotion.set_challenger(record)
        out.update(alias="challenger")
    return out


def create_in_ollama(record: dict, export_dir: Path, log) -> str:
    """`ollama create <tag>` from the GGUF and the Modelfile's template/parameters, when Ollama is reachable."""
    if not ollama_reachable():
        return "skipped (OLLAMA_HOST unset or unreachable; the service runs the GGUF with llama.cpp)"
    import ollama

    client = ollama.Client()
    digest = client.create_blob(record["gguf"])
    client.create(
        model=record["ollama_tag"],
        files={"selector.gguf": digest},
        template=OLLAMA_TEMPLATE,
        parameters={"stop": ["<|im_end|>", "<|endoftext|>"], "temperature": 0, "num_ctx": record["num_ctx"]},
    )
    log(f"deploy: ollama create {record['ollama_tag']}")
    return f"created {record['ollama_tag']}"


def main(argv: list[str] | None = None) -> None:
    """`python -m eval.deploy [ranker|llm]`: gate one chain's challengers (`eval.systems.CHAINS`)."""
    chain = chain_arg(argv, "deploy")
    console = Console(stderr=True)
    p = load_section("params.yaml", "deploy", DeployParams)
    trial = load_section("params.yaml", "trial", TrialParams)
    decision = chain_file(Path(p.metrics) / "deploy.json", chain)
    try:
        out = deploy(p, lambda s: console.print(s, soft_wrap=True), chain, trial)
    except RegistryError as e:
        console.print(f"[red]deploy failed:[/red] {e}", soft_wrap=True)
        raise SystemExit(1) from None
    write_atomic(decision, json.dumps(out, indent=2, default=str) + "\n")
    for system, why in out["not_registered"].items():
        console.print(f"deploy: {system} not registered: {why}", soft_wrap=True)
    for system, c in out["challengers"].items():
        console.print(
            f"deploy: {system} -> {c['version']} ({c['kind']}), mean recall@5 {c['mean_recall@5']}: "
            f"{'passed the gate' if c['passed_gate'] else 'did not pass the gate'}",
            soft_wrap=True,
        )
        for reason in c["reasons"]:
            console.print(f"  - {reason}", soft_wrap=True)
    if out.get("waiting_for"):
        t = out["waiting_for"]
        console.print(
            f"deploy: {out['version']} registered; trial {t['id']} ({t['challenger']} vs {t['champion']}) is still "
            "running, so it waits: `pai retrain` again once that trial has decided (`pai status`)",
            soft_wrap=True,
        )
    elif out.get("trial_running"):
        console.print(
            f"deploy: {out['version']} registered, no alias: trial {out['trial_running']['id']} holds `challenger`",
            soft_wrap=True,
        )
    elif out["alias"] is None:
        console.print(f"deploy: {chain} chain: nothing registered")
    elif out.get("trial"):
        t = out["trial"]
        console.print(
            f"deploy: {out['version']} is on trial {t['id']} against {t['champion']}: {t['rule']['share']:.0%} of "
            f"queries interleaved (up to {t['rule']['max_share']:.0%} as the evidence for it grows); promoted or "
            f"rejected within {t['rule']['max_judged']} judged queries (cited, the two contexts differing) or "
            f"{t['rule']['max_cited']} cited ones "
            "(`pai status` follows it)",
            soft_wrap=True,
        )
    elif out["alias"] == "champion" and "services" not in out:
        console.print(f"deploy: {out['version']} is already the champion")
    elif out["alias"] == "champion":
        console.print(
            f"deploy: {out['version']} is champion; {out['services']} running service(s) swapped "
            f"(ms: {', '.join(f'{x:.0f}' for x in out['swap_ms']) or '-'})",
            soft_wrap=True,
        )
    else:
        console.print(
            f"deploy: no promotion; {out['version']} is challenger"
            + ("" if p.promote else " (deploy.promote is false)")
        )


if __name__ == "__main__":
    main()
