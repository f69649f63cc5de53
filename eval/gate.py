"""The deploy gate: whether a challenger earns promotion, or a trial, from one evaluate result (`gate`, a pure
function), and its params (`DeployParams`, params.yaml `deploy`). The reference on each benchmark is the best
baseline of `eval.systems.BASELINE_TABLE` (on the held-out feedback, none of the first stage's order, which logged
it). On every in-domain benchmark (a judged split whose domain feeds the feedback log) a challenger must beat it
by `deploy.margin` Recall@5 with the paired-bootstrap 95 % CI above 0, and not trail the champion; on the held-out
feedback, scored by its unbiased inverse-propensity estimate (`in_domain_guard`), it may trail the reference and
the champion by at most `deploy.guard_tolerance`: labels a consumer earned on what it was shown can catch a
regression on the user's own queries, but with a few explored chunks per hundred queries they are too weak to
prove a margin; on every out-of-domain one it may trail the reference by at most `deploy.ood_tolerance`; and
neither answer quality (answer in context) nor the JSON-valid rate may drop by more than their tolerances. The
stage that applies it: `eval.deploy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .systems import BASELINES, FIRST_STAGE

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
    promotion: str = "trial"
    """trial: a trial on the user's own traffic decides (section trial), in the lab's demo too; judged: the in-domain
    margin promotes; auto: judged where every in_domain benchmark has items in this store, else trial"""
    promote: bool = True
    """announce a passing challenger to running services (hot-swap), or start its trial"""
    wait_s: float = 120.0
    """wait this long for running services' canaries"""
    answer_f1_tolerance: float = 0.05
    """the reader's answer F1 (eval/reader.py) from the challenger's context may trail the reference baseline's by at
    most this where the paired 95 % CI is below 0 too (set before measuring; a 135 M reader on 20 questions is
    noisy)"""
    register_cpu_llm: bool = True
    """the CPU profile's LLM (SmolLM2-135M) is registered with its metrics and gated like any challenger (false:
    evaluated only, `not_registered` says why)"""

    def problems(self) -> list[str]:
        out = []
        tolerances = (
            self.ood_tolerance,
            self.guard_tolerance,
            self.answer_tolerance,
            self.json_valid_tolerance,
            self.answer_f1_tolerance,
        )
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
        reasons += answer_guard(r, system, ref, p.answer_f1_tolerance, bench, d)
        if systems[system]["json_valid"] < systems[ref]["json_valid"] - p.json_valid_tolerance:
            reasons.append(
                f"{bench}: JSON-valid {systems[system]['json_valid']:.4f} < {ref}'s "
                f"{systems[ref]['json_valid']:.4f} - {p.json_valid_tolerance}"
            )
    return Decision(not reasons, reasons, details)


def answer_guard(r: dict, system: str, ref: str, tolerance: float, bench: str, details: dict) -> list[str]:
    """The reader's answer F1 from `system`'s context against `ref`'s: a drop past `tolerance` with the paired CI
    below 0 fails (no reader figures on this benchmark: nothing to guard)."""
    cmp = r.get("answers", {}).get("paired_f1", {}).get(f"{system}_vs_{ref}")
    if not cmp:
        return []
    details["answer_f1"] = cmp
    if cmp["f1_diff"] < -tolerance and cmp["ci95_high"] < 0:
        return [
            f"{bench}: answer F1 {cmp['f1_diff']:+.4f} vs {ref} (95% CI [{cmp['ci95_low']:+.4f}, "
            f"{cmp['ci95_high']:+.4f}]) loses more than {tolerance}"
        ]
    return []
