"""Stages `deploy` and `deploy_llm`: register one chain's evaluated challengers in MLflow, gate them, and
promote the best one that earns it. The ranker's chain (`python -m eval.deploy`: the learned ranker;
`metrics/eval.json` -> `metrics/deploy.json`) never waits for the GGUF; the LLM's (`python -m eval.deploy
llm`: the exported selector; `eval-llm.json` -> `deploy-llm.json`) runs after it, so a promoted ranker is
the champion the LLM must not trail.

The gate (`gate`, a pure function of a chain's evaluate result): on every in-domain benchmark (a judged split
whose domain feeds the feedback log) a challenger must beat the best baseline by `deploy.margin` Recall@5
with the paired-bootstrap 95 % CI above 0, and not trail the champion; on the held-out feedback, scored
by its unbiased inverse-propensity estimate (`in_domain_guard`), it may trail the best baseline and the
champion by at most `deploy.guard_tolerance`: labels a consumer earned on what it was shown can catch a
regression on the user's own queries, but with a few explored chunks per hundred queries they are too
weak to prove a margin; on every out-of-domain one it may trail the best baseline by at most
`deploy.ood_tolerance`; and neither answer quality (answer in context) nor the JSON-valid rate may drop
by more than their tolerances. Passing:
alias `champion`, announced to the running services (hot-swap; a failed canary moves it back). Where no judged
split speaks for the store (`deploy.promotion`), passing the checks that need no user labels puts it on a trial
instead (`retrieval.contracts.interleaving`), unless one is still running.
Failing: alias `challenger`, and the stage says why. Either way `metrics/deploy.json` records it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from retrieval.contracts.interleaving import TrialParams
from retrieval.files import write_atomic
from retrieval.params import load_section
from serving.selectors import OLLAMA_TEMPLATE, ollama_reachable

from . import promotion
from .promotion import RegistryError, folder_record, has_model
from .systems import BASELINES, FIRST_STAGE, chain_arg, chain_file

GATED = ("recall@5", "answer_in_context", "json_valid")


@dataclass(frozen=True)
class DeployParams:
    """The deploy stages: the gate, and promotion by a margin on a judged split or by a trial on the user's own traffic."""

    export: str = "models/export"
    """the LLM challenger (export stage)"""
    ranker: str = "models/ranker"
    """the learned ranker challenger (train_ranker stage)"""
    metrics: str = "metrics"
    """the evaluate stages' folder: reads eval.json (eval-llm.json), writes deploy.json (deploy-llm.json) beside it"""
    in_domain: str = "scifact-test"
    """judged benchmarks whose domain feeds the feedback log (the lab's cycle replays SciFact train): the margin is read
    there"""
    in_domain_guard: str = "feedback/val-ips"
    """the held-out feedback by its unbiased (inverse-propensity) estimate, beside the naive feedback/val (which grades
    the served order): no regression beyond guard_tolerance. Too weak to prove a margin: about 5 explored chunks per
    100 queries at explore_rate 0.05"""
    out_of_domain: str = "hotpotqa/test,code-docstrings"
    """other domains: general relevance must hold there (BM25 strong, BM25 weak)"""
    margin: float = 0.03
    """in domain: Recall@5 must beat the best baseline (eval/systems.py BASELINE_TABLE, the first stage's general order
    among them) by at least this, the paired 95 % CI above 0"""
    ood_tolerance: float = 0.02
    """out of domain: recall@5 may trail the best baseline by at most this"""
    guard_tolerance: float = 0.02
    """in_domain_guard: recall@5 may trail the best baseline and the champion by at most this"""
    answer_tolerance: float = 0.02
    """answer-in-context may drop by at most this"""
    json_valid_tolerance: float = 0.02
    """the share of selector answers that parse may drop by at most this against the reference baseline"""
    promotion: str = "auto"
    """judged: the in-domain margin promotes; trial: a trial on the user's own traffic decides (section trial); auto:
    judged where every in_domain benchmark has items in this store, else trial"""
    # auto: judged where every in-domain benchmark has items for this store, else trial
    promote: bool = True
    """announce a passing challenger to running services (hot-swap), or start its trial"""
    wait_s: float = 120.0
    """wait this long for running services' canaries"""
    register_cpu_llm: bool = False
    """the CPU profile's tiny LLM proves the code path (evaluated, json_valid), not registered as a challenger"""

    def problems(self) -> list[str]:
        out = []
        tolerances = (self.ood_tolerance, self.guard_tolerance, self.answer_tolerance, self.json_valid_tolerance)
        if min(self.margin, *tolerances, self.wait_s) < 0:
            out.append("deploy: margin, tolerances and wait_s must be >= 0")
        if self.promotion not in ("auto", "judged", "trial"):
            out.append(f"deploy.promotion: auto, judged or trial, not {self.promotion!r}")
        if self.promotion == "judged" and not [b for b in self.in_domain.split(",") if b]:
            out.append("deploy.in_domain: a judged promotion needs a benchmark the feedback log speaks for")
        return out


@dataclass(frozen=True)
class Decision:
    passed: bool
    reasons: list[str]  # why it failed (empty when it passed)
    details: dict  # per benchmark: domain, reference, recall@5 diff and CI, the gated figures


def judged(result: dict, p: DeployParams, system: str) -> bool:
    """Whether the in-domain margin decides (`deploy.promotion`): auto, where every in-domain benchmark has
    a result for `system` (its split is in this store), else a trial on the user's traffic."""
    if p.promotion != "auto":
        return p.promotion == "judged"
    benches = [b for b in p.in_domain.split(",") if b]
    return bool(benches) and all(system in result.get(b, {}).get("systems", {}) for b in benches)


def gate(result: dict, p: DeployParams, system: str = "selector", by_margin: bool = True) -> Decision:
    """Whether challenger `system` earns `champion` (`by_margin`) or a trial (not `by_margin`), from one
    evaluate result.

    The reference is the best baseline on each benchmark (`eval.systems.BASELINE_TABLE`; on the held-out
    feedback, none of the first stage's order, which logged it).
    In domain (`in_domain`, when `by_margin`), it must beat the best baseline by `margin` with the paired 95 %
    CI above 0, and not trail the champion, when there is one. A trial needs only the checks that take no
    judged split of the user's own: the guards below. Out of domain (`out_of_domain`), it may trail the
    best baseline by at most `ood_tolerance`: learning the user's corpus must not cost general relevance.
    Answer quality and the JSON-valid rate may not drop past their tolerances anywhere."""
    domains = (
        {b: "in" for b in p.in_domain.split(",") if b and by_margin}
        | {b: "guard" for b in p.in_domain_guard.split(",") if b}
        | {b: "out" for b in p.out_of_domain.split(",") if b}
    )
    reasons, details = [], {}
    for bench, domain in domains.items():
        r = result.get(bench)
        if r is None or system not in r["systems"]:
            reasons.append(f"{bench}: no {system} result")
            continue
        systems = r["systems"]
        refs = [b for b in BASELINES if b in systems and not (domain == "guard" and b in FIRST_STAGE)]
        ref = max(refs, key=lambda b: systems[b]["recall@5"])
        cmp = r["paired_bootstrap"][f"{system}_vs_{ref}"]
        d = {
            "domain": domain,
            "reference": ref,
            **cmp,
            **{m: systems[system][m] for m in GATED},
            **{f"{ref}_{m}": systems[ref][m] for m in GATED},
        }
        diff, lo, hi = cmp["recall@5_diff"], cmp["ci95_low"], cmp["ci95_high"]
        if domain == "in" and not (diff >= p.margin and lo > 0):
            reasons.append(
                f"{bench}: recall@5 {diff:+.4f} vs {ref} (95% CI [{lo:+.4f}, {hi:+.4f}]) does not beat "
                f"margin {p.margin} with the CI above 0"
            )
        if domain == "out" and diff < -p.ood_tolerance:
            reasons.append(f"{bench} (out of domain): recall@5 {diff:+.4f} vs {ref} loses more than {p.ood_tolerance}")
        if domain == "guard" and diff < -p.guard_tolerance:
            reasons.append(
                f"{bench} (held-out feedback): recall@5 {diff:+.4f} vs {ref} loses more than {p.guard_tolerance}"
            )
        if "champion" in systems and system != "champion" and domain in ("in", "guard"):
            champ = r["paired_bootstrap"].get(f"{system}_vs_champion", {})
            d["vs_champion"] = champ
            worst = 0.0 if domain == "in" else -p.guard_tolerance
            if champ and champ["recall@5_diff"] < worst:
                reasons.append(
                    f"{bench}: recall@5 {champ['recall@5_diff']:+.4f} vs the champion (a cycle must not be worse)"
                )
        details[bench] = d
        a, b = systems[system]["answer_in_context"], systems[ref]["answer_in_context"]
        if a is not None and b is not None and a < b - p.answer_tolerance:
            reasons.append(f"{bench}: answer in context {a:.4f} < {ref}'s {b:.4f} - {p.answer_tolerance}")
        if systems[system]["json_valid"] < systems[ref]["json_valid"] - p.json_valid_tolerance:
            reasons.append(
                f"{bench}: JSON-valid {systems[system]['json_valid']:.4f} < {ref}'s "
                f"{systems[ref]['json_valid']:.4f} - {p.json_valid_tolerance}"
            )
    return Decision(not reasons, reasons, details)


def challengers(p: DeployParams, result: dict, skipped: dict | None = None) -> dict[str, dict]:
    """The evaluated challengers' version records, by eval system name; those left out, with why, into `skipped`."""
    out = {}
    evaluated = {s for r in result.values() for s in r["systems"]}
    if "selector" in evaluated and (Path(p.export) / "selector.json").exists():
        record = json.loads((Path(p.export) / "selector.json").read_text())
        if record.get("profile") == "cpu" and not p.register_cpu_llm:
            (skipped if skipped is not None else {})["selector"] = (
                "the CPU profile's tiny LLM: evaluated to prove the path (export, GGUF, grammar), "
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
    result = json.loads(evaluated.read_text())
    skipped: dict[str, str] = {}
    records = challengers(p, result, skipped)
    out: dict = {"challengers": {}, "not_registered": skipped}
    if not records and skipped:  # evaluated, kept out of the registry on purpose (the CPU profile's tiny LLM)
        return out | {"version": None, "system": None, "passed_gate": False, "alias": None, "reasons": []}
    if not records:
        raise promotion.RegistryError(f"no challenger in {evaluated} (run train_ranker or export, then evaluate)")
    for line in promotion.record_trials():  # trials that closed since the last run, into the registry first
        log(f"deploy: {line}")
    ranked = []
    for system, record in records.items():
        decision = gate(result, p, system, by_margin=judged(result, p, system))
        metrics = {
            f"{b}/{m}": result[b]["systems"][system][m] for b in result if system in result[b]["systems"] for m in GATED
        }
        record = promotion.register(record, {k.replace("@", "_at_"): v for k, v in metrics.items() if v is not None})
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
    if passed and p.promote and by_trial and promotion.same_model(promotion.champion() or {}, record):
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
    elif out["alias"] is None:
        console.print(f"deploy: {chain} chain: nothing registered")
    elif out.get("trial"):
        t = out["trial"]
        console.print(
            f"deploy: {out['version']} is on trial {t['id']} against {t['champion']}: {t['rule']['share']:.0%} of "
            f"queries interleaved; promoted or rejected within {t['rule']['max_judged']} cited queries "
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
