"""`pai lab cycle`: the lab's demo, the loop as a user lives it, on the embedded defaults on SciFact (the main job).
It runs only in a store that holds nothing but SciFact (a fresh home, or one it made): never in a user's memory.

1. ingest the SciFact corpus (unchanged documents write nothing)
2. on-policy cycles, with the service a user runs beside them (it follows deployments: a promotion is hot-swapped
   into it, no restart). Each cycle:
   The train claims are cut into cycles + 1 parts of traffic (one cycle by default); day one serves the first with
   the first stage's order (a consumer asks each claim, reads the context and the previews it expands, `replay`,
   and posts its answer citing [n]), each claim asked `passes` times (fresh draws, another order), as a memory in
   use is asked the same things again before its first retrain. Then each cycle:
   a. `dvc repro` (dvc.yaml): pull -> train_ranker -> evaluate -> deploy, the LLM's chain (build -> train ->
      export -> evaluate_llm -> deploy_llm) after the last cycle only. With `deploy.promotion: trial` the
      challenger that passes the checks goes on trial;
   b. the next part of the traffic, claims the challenger never learned from, is served (the trial's share
      interleaved), and asked again in fresh passes until the trial's rule promotes or rejects it (`trial`:
      share, alpha, max_judged judged and max_cited cited trial queries);
   c. one line: the challenger against general on SciFact test with its CI, the trial's decision and cited
      queries, what the trial could see by the qrels (the questions on which one side alone showed a relevant chunk;
      the wins and losses a chunk that was not relevant decided), what users got (served Recall beside general alone)
      and the previews' tokens.
   So each part is served by whatever won before it. Then the champion as its users get it at the end: reading what
   the whole log's questions cited (`recalled`: all the traffic served, the last trial's too), against general on
   every judged set. After the last cycle, the LLM's lines: its loss first -> last,
   and per judged test set Recall@5 of its base model as served, the fine-tuned one and general, the share of
   outputs that parse, fine-tuned - base and fine-tuned - general with their paired CIs, and the chain's stage times.
3. first-stage retrieval on SciFact test, vector vs hybrid

The cycles' lines are written to `metrics/cycle.json` (evaluate.out) beside the stages' metrics.
"""

from __future__ import annotations

import functools
import json
import os
import random
from pathlib import Path
from typing import Annotated, Optional

import typer
from psycopg.conninfo import conninfo_to_dict
from rich.table import Table

from eval.consumer import ReplayParams
from eval.evaluate import EvaluateParams, print_table
from eval.retrieval_eval import evaluate, load_scifact
from eval.scifact_bench import BenchmarkParams
from retrieval.corpus.ingest import ingest_paths
from retrieval.db import DatabaseError, connect, own_database
from retrieval.embed import get_embedder
from retrieval.files import write_atomic
from retrieval.params import EmbedParams, IngestParams, ParamsError, SearchParams, UsedParams, load_section
from serving.server import BackgroundServer, build_service

from .. import workspace
from ..repro import dvc_repro, stage_metrics
from ..terminal import LAB_FEEDBACK, BenchDirOpt, ParamsOpt, _fail, console, emit, judged_dir, progress_bar
from .cycle_steps import (
    again,
    challenger_row,
    champion_line,
    champion_now,
    cycle_line,
    llm_lines,
    read_json,
    served_line,
    served_version,
    traffic,
)
from .replay import load_queries, replay

app = typer.Typer()

DEMO_HOME = Path(".pai")  # the demo's home when PAI_HOME is unset: the checkout's own, never the user's memory


def demo_home() -> Path | None:
    """Point PAI_HOME at the checkout's `.pai` when unset (the demo ingests SciFact and fills the log with replayed
    feedback: that must not land in the user's memory); the home chosen, None when PAI_HOME was set."""
    if os.environ.get("PAI_HOME"):
        return None
    os.environ["PAI_HOME"] = str(DEMO_HOME.resolve())
    return DEMO_HOME.resolve()


DEMO_DATABASE = "pai_lab_demo"  # the demo's database on the server DATABASE_URL names: never the user's


def demo_database() -> str | None:
    """With DATABASE_URL set (the user's own server), point it at the demo's database on that server, created when
    missing: the demo's SciFact and replayed feedback never land in the user's database. The database chosen, None
    when DATABASE_URL is unset (the embedded server in the demo's home) or names the demo's already."""
    url = os.environ.get("DATABASE_URL")
    if not url or conninfo_to_dict(url).get("dbname") == DEMO_DATABASE:
        return None
    os.environ["DATABASE_URL"] = own_database(DEMO_DATABASE, url)
    return DEMO_DATABASE


def run_cycle(
    params: Path,
    benchmark_dir: Path,
    split: str,
    bar,
    cycles: int = 1,
    serve: bool = True,
    log=print,
    passes: int = 3,
) -> dict:
    """The demo: ingest, then day one (its slice asked `passes` times), then `cycles` on-policy cycles (retrain, the
    trial decides on the next slice); with `serve` off, one retrain on the log as it is."""
    corpus = benchmark_dir / "scifact" / "corpus.jsonl"
    if not corpus.exists():
        raise FileNotFoundError(f"{corpus}: not found (pass --benchmark-dir)")
    ip = load_section(params, "ingest", IngestParams)
    sp = load_section(params, "search", SearchParams)
    consumer = load_section(params, "replay", ReplayParams)
    embedder = get_embedder(load_section(params, "embed", EmbedParams))
    queries = load_scifact(benchmark_dir, split)
    result: dict = {"cycles": []}
    with connect() as conn:
        me = workspace.identity(conn)  # the store whose pipeline outputs the checkout must hold
        (others,) = conn.execute(
            "SELECT count(*) FROM documents WHERE source NOT LIKE %s", ("%scifact/corpus.jsonl#%",)
        ).fetchone()
        if others:  # a user's memory: the demo would mix SciFact into it, and its replay into their log
            raise RuntimeError(
                f"this store holds {others} documents that are not the demo's: run the demo in a home of its own "
                "(PAI_HOME=$(mktemp -d) pai lab cycle), never in your memory"
            )
        task = bar.add_task("1. ingest SciFact corpus", total=None)
        result["ingest"] = ingest_paths(
            conn, [corpus], ip, sp, embedder, lambda d, t: bar.update(task, completed=d, total=t)
        ).as_dict()
    claims = load_queries(benchmark_dir, "scifact", "train")
    # the train claims in cycles + 1 parts of traffic: the first is day one's, each retrain's trial runs on the next
    parts = [claims[len(claims) * i // (cycles + 1) : len(claims) * (i + 1) // (cycles + 1)] for i in range(cycles + 1)]
    # the service a user runs, following deployments: a promotion swaps its selector in place; the checkout holds
    # this store's outputs (another store's parked) until they are read
    with workspace.held(Path.cwd(), me, log), BackgroundServer(build_service(params)) as srv:
        before = served_version(srv.url)
        if serve:
            n = len(parts[0])
            task = bar.add_task(f"2. day one: serve {n} train claims, {passes} passes", total=n * passes)
            day_one = replay(srv.url, parts[0], functools.partial(bar.advance, task), consumer)
            rng = random.Random(f"day-one:{consumer.seed}")
            for _ in range(passes - 1):
                again(srv.url, parts[0], rng, consumer, functools.partial(bar.advance, task))
            asked = n * passes
            result["day_one"] = {"served_by": before, "served": day_one.as_dict(), "queries_asked": asked}
            log(served_line("day one", before, day_one.as_dict()) + f"; {asked} queries in {passes} passes")
        for c in range(1, cycles + 1) if serve else ():
            served_by = served_version(srv.url)
            seconds = dvc_repro(bar, () if c == cycles else ("deploy",))  # the LLM's chain once, after the last
            row = {"cycle": c, "served_by": served_by, **challenger_row(params), "stage_seconds": seconds}
            row["served"], row["trial"] = traffic(
                srv.url, parts[c], row.get("trial_id"), consumer, c, bar, used=load_section(params, "used", UsedParams)
            )
            row["champion"] = served_version(srv.url)
            result["cycles"].append(row)
            log(cycle_line(row))
        if not serve:
            dvc_repro(bar)
        after = served_version(srv.url)
        result["service"] = {"before": before, "after": after, "swapped": before != after}
        if result["cycles"]:  # the cycles' lines as data, beside the stages' metrics
            # what the last champion's users get now: it reads what the whole log cited, all the traffic served
            if now := champion_now(params, after):
                result["champion_now"] = {"version": after, "sets": now}
                log(champion_line(after, now))
            out = Path(load_section(params, "evaluate", EvaluateParams).out) / "cycle.json"
            keep = ("day_one", "cycles", "champion_now")
            write_atomic(out, json.dumps({k: result[k] for k in keep if k in result}, indent=2, default=str) + "\n")
        result["pipeline"] = {name: read_json(path) for name, path in stage_metrics(params).items()}
    with connect() as conn:
        task = bar.add_task(f"3. search {len(queries)} {split} queries x 2 systems", total=2 * len(queries))
        result["retrieval"] = evaluate(conn, embedder, queries, sp, lambda: bar.advance(task))
    return result


def print_cycle(result: dict, console) -> None:
    i = result["ingest"]
    console.print(
        f"1. ingest: {i['documents']:,} documents ({i['documents_new']:,} new, {i['documents_unchanged']:,} unchanged), "
        f"{i['chunks_inserted']:,} chunks written, {i['docs_per_second']} docs/s"
    )
    if d := result.get("day_one"):
        console.print(f"2. {served_line('day one', d['served_by'], d['served'])}", soft_wrap=True, highlight=False)
    for row in result["cycles"]:
        console.print(f"2. {cycle_line(row)}", soft_wrap=True, highlight=False)
    if now := result.get("champion_now"):
        console.print(f"2. {champion_line(now['version'], now['sets'])}", soft_wrap=True, highlight=False)
    if not result["cycles"]:
        console.print("2. cycles: none (--no-replay: one retrain on the log as it is)")
    f, d, tr = (result["pipeline"][k] or {} for k in ("feedback", "dataset", "train"))
    console.print(
        f"3. dvc repro: pulled {f.get('queries')} queries; built {d.get('train_examples')} train / "
        f"{d.get('val_examples')} val examples, {d.get('pairs')} pairs; trained ({tr.get('profile')} profile, "
        f"{tr.get('base_model')}) {tr.get('steps')} steps in {tr.get('seconds')} s, loss "
        f"{tr.get('train_loss_first')} -> {tr.get('train_loss_last')}"
    )
    if x := result["pipeline"].get("export"):
        console.print(
            f"   export: {x['quant']} GGUF {x['gguf_mb']} MB; parity on {x['prompts']} prompts: picks {x['pick_agreement']:.0%}, "
            f"teacher-forced tokens {x['forced_top1_agreement']:.0%}, served output parses {x['served_parse_rate']:.0%}"
        )
    for chain in ("", "_llm"):
        if ev := result["pipeline"].get(f"eval{chain}"):
            print_table(ev, console)
        if dp := result["pipeline"].get(f"deploy{chain}"):
            for system, why in dp.get("not_registered", {}).items():
                console.print(f"   deploy{chain}: {system} not registered: {why}", soft_wrap=True)
            if dp["version"]:
                console.print(
                    f"   deploy{chain}: {dp['version']} registered; alias {dp['alias']}"
                    + ("" if dp["passed_gate"] else f" (gate: {'; '.join(dp['reasons'])})"),
                    soft_wrap=True,
                )
    last = result["cycles"][-1] if result["cycles"] else {}
    for line in llm_lines(result["pipeline"], last.get("stage_seconds")):
        console.print(f"   {line}", soft_wrap=True, highlight=False)
    if sv := result.get("service"):
        console.print(
            f"   service: served {sv['before']} before the cycles, {sv['after']} after"
            + (" (hot-swapped, no restart)" if sv["swapped"] else " (unchanged)")
        )
    rows = result["retrieval"]
    t = Table(title="4. SciFact first-stage retrieval (top-20 candidates, document level)")
    for col in rows[0]:
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(*[str(v) for v in r.values()])
    console.print(t)


@app.command("cycle", rich_help_panel=LAB_FEEDBACK, short_help="The demo: ingest SciFact, replay, dvc repro, measure.")
def cycle(
    benchmark_dir: BenchDirOpt = None,
    split: Annotated[
        Optional[str], typer.Option(help="SciFact qrels split to evaluate (default: params.yaml benchmark.split)")
    ] = None,
    cycles: Annotated[
        int,
        typer.Option(
            min=1,
            max=20,
            help="on-policy cycles: each serves a slice of SciFact train, retrains, and the trial decides",
        ),
    ] = 1,
    passes: Annotated[
        int,
        typer.Option(
            "--day-one-passes",
            min=1,
            max=20,
            help="how often day one asks each of its claims (fresh consumer draws) before the first retrain",
        ),
    ] = 3,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay/--no-replay",
            help="serve the train claims in cycles (--no-replay: one retrain on the log as it is)",
        ),
    ] = True,
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
) -> None:
    """The loop as a user lives it, on embedded defaults: ingest the SciFact corpus, then cycles that serve a slice of
    its train claims (a consumer citing chunks and reading previews), retrain (`dvc repro`), and let the trial on the
    next traffic promote or reject the challenger; then measure retrieval on the test queries (vector vs hybrid)."""
    benchmark_dir = judged_dir(params, benchmark_dir)
    if home := demo_home():
        console.print(f"pai lab cycle: the demo runs in {home} (PAI_HOME unset), not in your memory", soft_wrap=True)
    try:
        if db := demo_database():
            console.print(f"pai lab cycle: the demo uses database {db} on DATABASE_URL's server, not yours")
        split = load_section(params, "benchmark", BenchmarkParams).split if split is None else split
        with progress_bar() as bar:
            log = lambda line: bar.console.print(f"   {line}", soft_wrap=True, highlight=False)  # noqa: E731
            result = run_cycle(params, benchmark_dir, split, bar, cycles, replay, log, passes)
    except (ParamsError, DatabaseError, FileNotFoundError, RuntimeError) as e:  # WorkspaceError too
        _fail(str(e))
    emit(result, as_json, None, lambda c: print_cycle(result, c))
