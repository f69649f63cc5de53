"""`pai forget`: take memories back out of the store, with every copy of them (retrieval/ops/forget.py), and
`pai forget --verify TEXT`: every place a text could still be. Each run: parse -> call the core -> print."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from retrieval.db import DatabaseError, connect, store_id
from retrieval.ops import forget as core
from retrieval.ops import forget_files
from retrieval.params import ForgetParams, ParamsError, StagingParams, load_section
from retrieval.scopes import ScopeError, check
from serving.grants import grant_for

from .terminal import USE, FoundParamsOpt, _fail, console

app = typer.Typer()


def _when(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise core.ForgetError(
            f"--{name} {value[:40]!r}: give a date (2026-01-31) or a time (2026-01-31T12:00)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _may_write(token: str | None):
    """None (the store's owner, at this machine) without a token; with one, its grant's right to write a scope."""
    if token is None:
        return None
    try:
        grant = grant_for(f"Bearer {token}".encode())
    except ValueError as e:
        raise core.ForgetError(str(e)) from None
    if grant is None:
        raise core.ForgetError("--token is not a known token (PAI_TOKENS_FILE, PAI_*_TOKEN): nothing forgotten")
    return grant.may_write


@app.command("forget", rich_help_panel=USE, short_help="Take memories back out: every copy, every file, marked models.")
def forget_command(
    doc: Annotated[Optional[list[int]], typer.Option("--doc", help="a document id (repeat for several)")] = None,
    source: Annotated[Optional[str], typer.Option(help="a document's source, or every document of a file")] = None,
    scope: Annotated[Optional[str], typer.Option(help="every document of a scope (with others: only in it)")] = None,
    since: Annotated[Optional[str], typer.Option(help="documents written at or after this date or time (UTC)")] = None,
    until: Annotated[Optional[str], typer.Option(help="documents written before this date or time (UTC)")] = None,
    text: Annotated[Optional[str], typer.Option(help="every memory holding this text, and the text everywhere")] = None,
    verify: Annotated[
        Optional[str], typer.Option(help="forget nothing: list every place this text is still found")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="confirm a forget as wide as the store")] = False,
    remote: Annotated[bool, typer.Option("--remote", help="also DVC's local remotes")] = False,
    token: Annotated[
        Optional[str],
        typer.Option(
            envvar="PAI_TOKEN", help="forget as this token: only in the scopes it may write", show_default=False
        ),
    ] = None,
    staging_dir: Annotated[Optional[Path], typer.Option(help="override staging.dir")] = None,
    params: FoundParamsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Forget documents (by id, source, scope, time written, or a text they hold): their rows and vectors, what the
    query log holds of them, the staging files, the pulled feedback and training data, DVC's cache, MLflow's artifacts
    and the vector cache. Selectors trained on them are marked; `pai retrain` says a retrain without them is due."""
    try:
        fp = load_section(params, "forget", ForgetParams)
        directory = staging_dir or load_section(params, "staging", StagingParams).path()
        if scope is not None:
            check(scope)
        with connect() as conn:
            places = forget_files.places(fp, directory, remote=remote, store=store_id(conn))
            if verify is not None:
                _verify(conn, verify, places, as_json)
                return
            target = core.Target(
                doc_ids=tuple(doc or ()),
                source=source,
                scope=scope,
                since=_when(since, "since"),
                until=_when(until, "until"),
                text=text,
            )
            with console.status("forget: the database") as status:
                report = core.forget(
                    conn,
                    target,
                    places,
                    may_write=_may_write(token),
                    confirmed=yes,
                    progress=lambda name: status.update(f"forget: {name}"),
                )
    except (core.ForgetError, ParamsError, DatabaseError, ScopeError, ValueError) as e:
        _fail(str(e))
    for w in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
        return
    t = Table(title=f"forget (journal {report.journal_id})", show_header=False)
    for k in ("documents", "chunks", "candidates_unlabelled", "queries_rewritten", "learned_answers", "captures"):
        t.add_row(k.replace("_", " "), str(getattr(report, k)))
    for name, n in report.files.items():
        t.add_row(name, str(n))
    t.add_row("selectors marked", ", ".join(report.selectors_marked) or "none trained on it")
    t.add_row("seconds", f"{report.seconds:.2f}")
    console.print(t)
    if report.selectors_marked:
        console.print("a retrain without it is due: `pai retrain` (the champion keeps what it learned until then)")


def forgotten_line(marks: dict[str, str], champion: str | None) -> str | None:
    """What `pai status` and `pai retrain` say of the selectors trained on data since forgotten (None: none)."""
    if not marks:
        return None
    named = ", ".join(f"{v}{' (champion)' if v == champion else ''} on {day}" for v, day in marks.items())
    due = "a retrain without it is due" if champion in marks else "the champion is not among them"
    return f"trained on data since forgotten: {named}; {due}"


def _verify(conn, text: str, places: list[forget_files.Place], as_json: bool) -> None:
    if not text or "\0" in text:
        raise core.ForgetError("--verify needs a text without NUL characters")
    with console.status("verify: reading every place"):
        traces = forget_files.verify(conn, text, places)
    if as_json:
        print(json.dumps({"found": [t.__dict__ for t in traces], "places": [p.name for p in places]}, indent=2))
    for t in traces:
        console.print(f"found: {t.place}: {t.where}", soft_wrap=True)
    if traces:
        raise typer.Exit(1)
    console.print(f"not found in the database nor in {len(places)} places: {', '.join(p.name for p in places)}")
