"""`pai promote`, `pai rollback`, `pai status`: moves of the `champion` alias (eval/promotion.py)
between the registry's versions (eval/registry.py), announced to running services (the deployment log,
retrieval/logs/deployments.py). Each says what changed, or one line why not."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from eval.promotion import promote as do_promote
from eval.promotion import record_trials
from eval.promotion import rollback as do_rollback
from eval.registry import RegistryError, champion, client, history, record_of
from retrieval.contracts.selection import FIRST_STAGE, OLD_FIRST_STAGE
from retrieval.conversation import capture
from retrieval.db import DatabaseError, connect, store_id
from retrieval.logs import deployments, trials
from retrieval.logs.used import used_labels
from retrieval.ops import forget_marks
from retrieval.params import ParamsError, UsedParams, load_section

from . import workspace
from .forget import forgotten_line
from .terminal import RETRAIN, FoundParamsOpt, _fail, console
from .workspace import WorkspaceError

app = typer.Typer()

WaitOpt = Annotated[float, typer.Option(help="seconds to wait for running services' canaries (0: don't wait)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON")]


def _report(moved, what: str, as_json: bool) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "version": moved.version,
                    "deployment_id": moved.deployment_id,
                    "services": moved.services,
                    "swap_ms": moved.swap_ms,
                    "applies": moved.applies,
                },
                indent=2,
                default=str,
            )
        )
        return
    if moved.services == 0:
        console.print(
            f"{what} {moved.version} (deployment {moved.deployment_id}); no service is running: it loads it at start"
        )
        return
    ms = ", ".join(f"{x:.0f} ms" for x in moved.swap_ms) or "pending"
    console.print(
        f"{what} {moved.version} (deployment {moved.deployment_id}): {len(moved.swap_ms)}/{moved.services} service(s) "
        f"serving it, announce -> serving {ms}",
        soft_wrap=True,
    )


def used_params(params: Path | None) -> UsedParams:
    """The params' `used` section (what the services credit a trial by); its defaults without the file named."""
    return load_section(params, "used", UsedParams) if params is None or params.exists() else UsedParams()


@app.command("status", rich_help_panel=RETRAIN, short_help="Registry aliases, deployments, what each service did.")
def status(as_json: JsonOpt = False, params: FoundParamsOpt = None) -> None:
    """Registry aliases, the latest deployments and what each service did about them."""
    try:
        settled = record_trials()  # trials closed since the last look: into the registry first
        champ = champion()
        try:
            challenger = record_of("challenger")["version"]
        except RegistryError:
            challenger = None
        hist = history()
        client()  # registry reachable
        forgotten = forget_marks.marked()
        with connect() as conn:
            deps = [(d, deployments.applies(conn, d.id)) for d in deployments.deployments(conn, 8)]
            services = deployments.listening_services(conn)
            captured = capture.counters(conn)
            running = trials.running(conn)
            relabel = partial(used_labels, p=used_params(params))
            evidence = trials.verdict(conn, running, relabel).as_dict() if running else None
            recent = [t.as_dict() for t in trials.recent(conn, 5)]
            store = store_id(conn)
            ws = workspace.describe(workspace.CHECKOUT, store)  # whose pipeline outputs the checkout holds
        if champ and champ.get("store") not in (None, store):  # a registry shared with another store: not ours
            champ = None
    except (RegistryError, DatabaseError, ParamsError, WorkspaceError) as e:
        _fail(str(e))
    out = {
        "champion": champ["version"] if champ else f"{FIRST_STAGE} (none promoted)",
        "challenger": challenger,
        "champion_history": hist,
        "forgotten_data": forgotten,  # versions trained on data since forgotten -> the day
        "services_listening": services,
        "capture": captured,
        "trial": running.as_dict() | {"evidence": evidence} if running else None,
        "trials": recent,
        "workspace": ws,
        "deployments": [
            {
                "id": d.id,
                "version": d.version,
                "action": d.action,
                "reason": d.reason,
                "at": d.created_at.isoformat(),
                "applies": [{**a, "applied_at": a["applied_at"].isoformat()} for a in ap],
            }
            for d, ap in deps
        ],
    }
    if as_json:
        print(json.dumps(out, indent=2, default=str))
        return
    for line in settled:
        console.print(line, soft_wrap=True)
    if running:
        console.print(
            f"trial {running.id}: [bold]{running.challenger}[/bold] vs {running.champion} on "
            f"{running.rule.share_at(evidence['evidence_for']):.0%} of queries now: "
            f"{evidence['reason']}; evidence for {evidence['evidence_for']:g}, against {evidence['evidence_against']:g} "
            f"(decides at {1 / running.rule.alpha:g}, or after {running.rule.max_judged} judged or "
            f"{running.rule.max_cited} cited queries)",
            soft_wrap=True,
        )
    console.print(
        f"champion: [bold]{out['champion']}[/bold]   challenger: {challenger or '-'}   "
        f"services listening: {services}   history: {' -> '.join(hist) or '-'}",
        soft_wrap=True,
    )
    if line := forgotten_line(forgotten, champ["version"] if champ else None):
        console.print(line, soft_wrap=True)
    if ws:
        console.print(workspace.status_line(ws), soft_wrap=True, markup=False, highlight=False)
    rejected = ", ".join(f"{g} {n}" for g, n in captured["rejected"].items())
    console.print(
        f"capture: {captured['captures']} exchange(s), {captured['stored']} stored ({captured['facts_stored']} facts, "
        f"{captured['fact_duplicates']} duplicate, {captured['fact_links']} linked), {captured['duplicate']} all-duplicate, "
        f"rejected by {rejected}; {captured['pending']} pending, {captured['failed']} failed; "
        f"noise prototypes {captured['noise_prototypes']} (v{captured['noise_version']})",
        soft_wrap=True,
    )
    t = Table(title="deployments (newest first)")
    for col in ("id", "version", "action", "at", "services", "reason"):
        t.add_column(col, overflow="fold")
    for d, ap in deps:
        said = ", ".join(
            f"{'ok' if a['ok'] else 'REJECTED'} {a['swap_ms']:.0f} ms" + ("" if a["ok"] else f": {a['detail']}")
            for a in ap
        )
        t.add_row(
            str(d.id), d.version, d.action, d.created_at.strftime("%Y-%m-%d %H:%M:%S"), said or "-", d.reason or ""
        )
    console.print(t)


@app.command("promote", rich_help_panel=RETRAIN, short_help="Make VERSION the champion; running services hot-swap it.")
def promote(
    version: Annotated[str, typer.Argument(help="registry version (3 or pai-selector:3), challenger, or first-stage")],
    reason: Annotated[str, typer.Option(help="why, recorded with the deployment")] = "manual promote",
    wait: WaitOpt = 60.0,
    as_json: JsonOpt = False,
) -> None:
    """Make VERSION the champion and hot-swap it into running services (moved back if their canary fails)."""
    if version == OLD_FIRST_STAGE:  # deprecated alias, for one release
        print(f"pai promote {OLD_FIRST_STAGE} is deprecated: say pai promote {FIRST_STAGE}", file=sys.stderr)
        version = FIRST_STAGE
    try:
        _report(do_promote(version, reason, wait), "promoted", as_json)
    except (RegistryError, DatabaseError) as e:
        _fail(str(e))


@app.command("rollback", rich_help_panel=RETRAIN, short_help="Move the champion back to the previous one.")
def rollback(wait: WaitOpt = 60.0, as_json: JsonOpt = False) -> None:
    """Move the champion back to the previous one (the first-stage order before the first)."""
    try:
        _report(do_rollback(wait), "rolled back to", as_json)
    except (RegistryError, DatabaseError) as e:
        _fail(str(e))
