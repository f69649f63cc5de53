"""`pai maintain` (garbage collection, usage weights, database health; `pai serve` runs the same on a
schedule) and `pai migrate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import psycopg
import typer
from rich.table import Table

from retrieval.corpus import bulk, vector_index
from retrieval.db import (
    DatabaseError,
    connect,
    first_line,
    grant_runtime,
    latest_version,
    migrate,
    schema_problem,
    schema_version,
)
from retrieval.ops import maintain
from retrieval.params import (
    ForgetParams,
    MaintainParams,
    ParamsError,
    SearchParams,
    StagingParams,
    load_section,
)

from .terminal import UPKEEP, FoundParamsOpt, _fail, console

app = typer.Typer()


@app.command("maintain", rich_help_panel=UPKEEP, short_help="Garbage-collect, usage weights, VACUUM, HNSW recall.")
def maintain_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="count what would change; change nothing")] = False,
    staging_dir: Annotated[Optional[Path], typer.Option(help="override staging.dir")] = None,
    params: FoundParamsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Garbage-collect (gone files, superseded documents, orphan rows, old staging files, old pulled
    feedback), recompute usage weights, VACUUM/ANALYZE and re-check HNSW recall after growth."""
    try:
        mp = load_section(params, "maintain", MaintainParams)
        sp = load_section(params, "search", SearchParams)
        fp = load_section(params, "forget", ForgetParams)
        directory = staging_dir or load_section(params, "staging", StagingParams).path()
        with connect() as conn, console.status("maintenance" + (" (dry run)" if dry_run else "")):
            report = maintain.run(conn, mp, sp, directory, dry_run=dry_run, fp=fp).as_dict()
    except (ParamsError, DatabaseError) as e:
        _fail(str(e))
    for w in report["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
    if as_json:
        print(json.dumps(report, indent=2))
    elif report["skipped"]:
        console.print(f"maintenance skipped: {report['skipped']}")
    else:
        console.print(report_table(report))


@app.command("migrate", rich_help_panel=UPKEEP, short_help="Create or upgrade the schema, as the database owner.")
def migrate_command(
    grant: Annotated[
        Optional[str], typer.Option(help="a runtime role to grant DML on every table (now and later) and the sequences")
    ] = None,
    params: FoundParamsOpt = None,
) -> None:
    """Create or upgrade the schema (and the HNSW index to params), as the database owner: the runtime (serve,
    ingest, query, feedback, maintain) then needs only DML. The embedded default does this by itself."""
    try:
        sp = load_section(params, "search", SearchParams)
        with connect(migrate_schema=False) as conn:
            applied = migrate(conn)
            rebuilt = vector_index.ensure_hnsw(conn, sp.hnsw_m, sp.hnsw_ef_construction)
            lexical = bulk.ensure_lexical(conn)  # a first load killed before its end left them away
            if grant:
                try:
                    grant_runtime(conn, grant)
                except psycopg.Error as e:
                    raise DatabaseError(f"schema migrated, but granting {grant} failed: {first_line(e)}") from None
            version = schema_version(conn)
    except (ParamsError, DatabaseError) as e:
        _fail(str(e))
    except psycopg.Error as e:
        _fail(schema_problem(e, None, latest_version()))
    console.print(
        f"schema at version {version}"
        + (f" (applied {', '.join(applied)})" if applied else " (nothing to apply)")
        + ("; HNSW index rebuilt to params" if rebuilt else "")
        + (f"; built the missing {', '.join(lexical)}" if lexical else "")
        + (f"; {grant} may now read and write every table" if grant else "")
    )


def report_table(r: dict) -> Table:
    t = Table(title="maintenance" + (" (dry run: nothing changed)" if r["dry_run"] else ""), show_header=False)
    verb = "would delete" if r["dry_run"] else "deleted"
    t.add_row(f"documents of gone files ({r['files_gone']} files)", f"{r['documents_deleted']} {verb}")
    t.add_row("superseded documents", f"{r['superseded_deleted']} {verb}")
    t.add_row("chunks of both", f"{r['chunks_deleted']} {verb}")
    for name, n in r["orphans"].items():
        t.add_row(name.replace("_", " "), f"{n} {'would fix' if r['dry_run'] else 'fixed'}" if n else "0")
    t.add_row(
        "feedback queries past retention",
        f"{r['feedback_deleted']} {verb}, {r['feedback_kept_unpulled']} kept (not pulled)",
    )
    t.add_row("staging files past retention", f"{r['staging_deleted']} {verb}")
    u = r["usage"]
    t.add_row(
        "usage weights",
        f"{u.get('chunks_weighted', 0)} chunks ({u.get('up', 0)} up, {u.get('down', 0)} down), "
        f"{u.get('changed', 0)} changed, {u.get('dropped', 0)} dropped",
    )
    t.add_row("VACUUM (ANALYZE)" + (" due" if r["dry_run"] else ""), ", ".join(r["vacuumed"]) or "-")
    t.add_row("ANALYZE" + (" due" if r["dry_run"] else ""), ", ".join(r["analyzed"]) or "-")
    t.add_row("HNSW recall check", json.dumps(r["index_check"]) if r["index_check"] else "not due")
    rs = r.get("rescrub") or {}
    t.add_row(
        "re-scrubbed (scrubber changed)",
        f"{rs.get('documents', 0)} documents, {rs.get('chunks_changed', 0)} chunks changed, "
        f"{sum((rs.get('redactions') or {}).values())} secrets; {rs.get('stale_documents', 0)} still to do",
    )
    ex = r.get("expiry") or {}
    t.add_row(
        "expired memories",
        f"{ex.get('expired', 0)} would be forgotten"
        if r["dry_run"]
        else f"{ex.get('forgotten', 0)} forgotten ({ex.get('chunks', 0)} chunks); {ex.get('stamped', 0)} given an expiry",
    )
    t.add_row("seconds", str(r["seconds"]))
    return t
