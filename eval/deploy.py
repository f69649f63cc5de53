"""Stage `deploy`: register the evaluated challengers (the exported LLM selector, the cross-encoder)
in MLflow, gate them, and promote the best one that earns it.

The gate (`gate`, a pure function of `metrics/eval.json`): on every gated benchmark a challenger
must beat the reference, the champion when there is one, else the best baseline by
Recall@5, by more than `deploy.margin` with the paired-bootstrap 95 % CI above 0; and neither answer
quality (answer in context) nor the JSON-valid rate may drop by more than their tolerances. Passing:
alias `champion`, announced to the running services (hot-swap; a failed canary moves it back).
Failing: alias `challenger`, and the stage says why. Either way `metrics/deploy.json` records it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from retrieval.files import write_atomic
from retrieval.params import load_section
from serving.selectors import OLLAMA_TEMPLATE, ollama_reachable

from . import promotion
from .evaluate import BASELINES
from .promotion import RegistryError, ce_record

GATED = ("recall@5", "answer_in_context", "json_valid")


@dataclass(frozen=True)
class DeployParams:
    export: str = "models/export"  # the LLM challenger: the export stage's folder (selector.json, selector.gguf, Modelfile)
    cross_encoder: str = "models/cross_encoder"  # the cross-encoder challenger (train_ce's folder), when evaluated
    eval: str = "metrics/eval.json"  # the evaluate stage's result (challenger = system "selector")
    out: str = "metrics/deploy.json"  # the decision, as DVC metrics
    benchmarks: str = ""  # comma-separated eval.json benchmark names the gate reads; empty = all
    margin: float = 0.0  # recall@5 must beat the reference by more than this
    answer_tolerance: float = 0.02  # answer-in-context may drop by at most this
    json_valid_tolerance: float = 0.02  # JSON-valid rate may drop by at most this
    promote: bool = True  # announce a passing challenger to the running services
    wait_s: float = 120.0  # how long to wait for running services' canaries

    def problems(self) -> list[str]:
        bad = self.margin < 0 or self.answer_tolerance < 0 or self.json_valid_tolerance < 0 or self.wait_s < 0
        return ["deploy: margin, tolerances and wait_s must be >= 0"] if bad else []


@dataclass(frozen=True)
class Decision:
    passed: bool
    reasons: list[str]  # why it failed (empty when it passed)
    details: dict  # per benchmark: reference, recall@5 diff and CI, the gated figures


def gate(result: dict, p: DeployParams, system: str = "selector") -> Decision:
    """Whether challenger `system` earns `champion`, from one evaluate result."""
    names = [b for b in p.benchmarks.split(",") if b] or list(result)
    reasons, details = [], {}
    if not names:
        return Decision(False, ["no benchmark results to gate on"], {})
    for bench in names:
        r = result.get(bench)
        if r is None or system not in r["systems"]:
            reasons.append(f"{bench}: no {system} result")
            continue
        systems = r["systems"]
        ref = "champion" if "champion" in systems else max(BASELINES, key=lambda b: systems[b]["recall@5"])
        cmp = r["paired_bootstrap"][f"{system}_vs_{ref}"]
        d = {"reference": ref, **cmp, **{f"{m}": systems[system][m] for m in GATED}, **{f"{ref}_{m}": systems[ref][m] for m in GATED}}
        details[bench] = d
        if not (cmp["recall@5_diff"] > p.margin and cmp["ci95_low"] > 0):
            reasons.append(f"{bench}: recall@5 {cmp['recall@5_diff']:+.4f} vs {ref} (95% CI [{cmp['ci95_low']:+.4f}, "
                           f"{cmp['ci95_high']:+.4f}]) does not beat margin {p.margin} with the CI above 0")  # fmt: skip
        a, b = systems[system]["answer_in_context"], systems[ref]["answer_in_context"]
        if a is not None and b is not None and a < b - p.answer_tolerance:
            reasons.append(f"{bench}: answer in context {a:.4f} < {ref}'s {b:.4f} - {p.answer_tolerance}")
        if systems[system]["json_valid"] < systems[ref]["json_valid"] - p.json_valid_tolerance:
            reasons.append(f"{bench}: JSON-valid {systems[system]['json_valid']:.4f} < {ref}'s "
                           f"{systems[ref]['json_valid']:.4f} - {p.json_valid_tolerance}")  # fmt: skip
    return Decision(not reasons, reasons, details)


def challengers(p: DeployParams, result: dict) -> dict[str, dict]:
    """The evaluated challengers' version records, by eval system name."""
    out = {}
    evaluated = {s for r in result.values() for s in r["systems"]}
    if "selector" in evaluated and (Path(p.export) / "selector.json").exists():
        out["selector"] = json.loads((Path(p.export) / "selector.json").read_text())
    if "cross_encoder" in evaluated and (Path(p.cross_encoder) / "ce_config.json").exists():
        out["cross_encoder"] = ce_record(Path(p.cross_encoder))
    return out


def deploy(p: DeployParams, log=print) -> dict:
    """Register every evaluated challenger; the best one that passes the gate (by mean Recall@5
    over the gated benchmarks) becomes champion, the best of the rest challenger."""
    result = json.loads(Path(p.eval).read_text())
    records = challengers(p, result)
    if not records:
        raise promotion.RegistryError(f"no challenger in {p.eval} (run export/train_ce and evaluate)")
    out: dict = {"challengers": {}}
    ranked = []
    for system, record in records.items():
        decision = gate(result, p, system)
        metrics = {f"{b}/{m}": result[b]["systems"][system][m] for b in result if system in result[b]["systems"] for m in GATED}
        record = promotion.register(record, {k.replace("@", "_at_"): v for k, v in metrics.items() if v is not None})
        if record["kind"] == "llm":
            out["ollama"] = create_in_ollama(record, Path(p.export), log)
        recall = [d["recall@5"] for d in decision.details.values()]
        mean = round(sum(recall) / len(recall), 4) if recall else 0.0
        out["challengers"][system] = {"version": record["version"], "kind": record["kind"], "passed_gate": decision.passed,
                                      "mean_recall@5": mean, "reasons": decision.reasons, "gate": decision.details}  # fmt: skip
        ranked.append((decision.passed, mean, system, record))
    ranked.sort(key=lambda t: (t[0], t[1]), reverse=True)
    passed, _, best, record = ranked[0]
    out.update(version=record["version"], system=best, passed_gate=passed, reasons=out["challengers"][best]["reasons"])
    if passed and p.promote:
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
    client.create(model=record["ollama_tag"], files={"selector.gguf": digest}, template=OLLAMA_TEMPLATE,
                  parameters={"stop": ["<|im_end|>", "<|endoftext|>"], "temperature": 0, "num_ctx": record["num_ctx"]})  # fmt: skip
    log(f"deploy: ollama create {record['ollama_tag']}")
    return f"created {record['ollama_tag']}"


def main() -> None:
    console = Console(stderr=True)
    p = load_section("params.yaml", "deploy", DeployParams)
    try:
        out = deploy(p, lambda s: console.print(s, soft_wrap=True))
    except RegistryError as e:
        console.print(f"[red]deploy failed:[/red] {e}", soft_wrap=True)
        raise SystemExit(1) from None
    write_atomic(Path(p.out), json.dumps(out, indent=2, default=str) + "\n")
    for system, c in out["challengers"].items():
        console.print(f"deploy: {system} -> {c['version']} ({c['kind']}), mean recall@5 {c['mean_recall@5']}: "
                      f"{'passed the gate' if c['passed_gate'] else 'did not pass the gate'}", soft_wrap=True)  # fmt: skip
        for reason in c["reasons"]:
            console.print(f"  - {reason}", soft_wrap=True)
    if out["alias"] == "champion":
        console.print(f"deploy: {out['version']} is champion; {out['services']} running service(s) swapped "
                      f"(ms: {', '.join(f'{x:.0f}' for x in out['swap_ms']) or '-'})", soft_wrap=True)  # fmt: skip
    else:
        console.print(f"deploy: no promotion; {out['version']} is challenger" + ("" if p.promote else " (deploy.promote is false)"))


if __name__ == "__main__":
    main()
