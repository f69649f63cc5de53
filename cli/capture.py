"""`pai capture FILE|-` (exchanges as one JSON object or JSONL, taken through the gates in-process)
and `pai capture noise` (the learned noise prototypes). `pai lab bench capture` is cli/lab/bench_capture.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from retrieval.conversation import capture, intake, noise
from retrieval.conversation.capture import CaptureParams
from retrieval.conversation.intake import CaptureInputError, parse_exchange
from retrieval.db import DatabaseError, connect
from retrieval.embed import get_embedder
from retrieval.params import EmbedParams, IngestParams, ParamsError, SearchParams, load_section
from serving.extractor import build_extractor
from serving.interface import SelectorLoadError

from .terminal import USE, FoundParamsOpt, JsonOpt, _fail, console

app = typer.Typer()


def read_records(raw: bytes, max_chars: int) -> list[tuple[int, intake.Exchange | str]]:
    """(line number, exchange or one-line error) per record: the input as one JSON object when it is
    one (pretty-printed, say), else one JSON object per line."""
    try:
        whole = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        whole = None
    if isinstance(whole, dict):
        return [(1, _exchange(whole, max_chars))]
    out: list[tuple[int, intake.Exchange | str]] = []
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            out.append((n, _exchange(json.loads(line.decode("utf-8")), max_chars)))
        except UnicodeDecodeError:
            out.append((n, "not UTF-8 text"))
        except json.JSONDecodeError as e:
            out.append((n, f"not JSON ({e.msg} at column {e.colno})"))
    return out


def _exchange(obj, max_chars: int) -> intake.Exchange | str:
    try:
        return parse_exchange(obj, max_chars)
    except CaptureInputError as e:
        return str(e)


@app.command("capture", rich_help_panel=USE, short_help="Capture facts from conversation exchanges (JSON or JSONL).")
def capture_command(
    target: Annotated[str, typer.Argument(help="a JSON/JSONL file of exchanges, - for stdin, or `noise`")],
    params: FoundParamsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Capture facts from exchanges {"user", "assistant", "source"?, "session"?}: one JSON object or
    JSONL. `pai capture noise` shows the learned noise prototypes instead (a file named noise: ./noise)."""
    try:
        cp = load_section(params, "capture", CaptureParams)
        if target == "noise":
            with connect() as conn:
                return _show_noise(noise.load(conn), cp, as_json)
        ip = load_section(params, "ingest", IngestParams)
        sp = load_section(params, "search", SearchParams)
        embedder = get_embedder(load_section(params, "embed", EmbedParams))
        extractor = build_extractor(cp)
        raw = sys.stdin.buffer.read() if target == "-" else Path(target).read_bytes()
    except (ParamsError, DatabaseError, SelectorLoadError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{target}: {e.strerror or e}")
    records = read_records(raw, cp.max_chars)
    results, errors = [], 0
    try:
        with connect() as conn:
            for n, ex in records:
                if isinstance(ex, str):
                    errors += 1
                    console.print(f"[red]error:[/red] line {n}: {ex}", soft_wrap=True)
                    continue
                cid = intake.submit(conn, ex)
                try:
                    r = capture.process(conn, cid, cp, ip, sp, embedder, extractor)
                except Exception as e:  # noqa: BLE001 - this exchange fails, the others go on
                    errors += 1
                    capture.fail(conn, cid, f"{type(e).__name__}: {e}")
                    console.print(f"[red]error:[/red] line {n}: capture {cid} failed: {e}", soft_wrap=True)
                    continue
                results.append({"line": n, **r.as_dict()})
                if not as_json:
                    console.print(_line(n, r), soft_wrap=True)
    except DatabaseError as e:
        _fail(str(e))
    if as_json:
        print(json.dumps(results, indent=2))
    if not records:
        _fail("no exchange in the input")
    if errors == len(records):
        _fail(f"nothing captured: every record failed ({errors} error(s) above)")


def _line(n: int, r: capture.CaptureResult) -> str:
    if r.status in ("stored", "duplicate"):
        return (
            f"line {n}: capture {r.id} {r.status}: {len(r.fact_ids)} fact(s) stored, {len(r.duplicate_of)} duplicate(s),"
            f" {r.linked} linked ({r.decided_by})"
        )
    return f"line {n}: capture {r.id} rejected by {r.gate} ({r.decided_by}): {r.reason}"


def _show_noise(protos: noise.Prototypes, cp: CaptureParams, as_json: bool) -> None:
    out = {
        "version": protos.version,
        "built_at": protos.built_at.isoformat() if protos.built_at else None,
        "rejections_seen": protos.rejections,
        "threshold": cp.noise_threshold,
        "prototypes": protos.examples,
    }
    if as_json:
        print(json.dumps(out, indent=2))
        return
    if protos.cold:
        console.print(
            f"no noise prototypes yet ({protos.rejections} rejection(s) seen, the first build comes at "
            f"{cp.noise_rebuild_every}): the noise gate passes everything"
        )
        return
    console.print(
        f"noise prototypes v{protos.version}, built {protos.built_at:%Y-%m-%d %H:%M:%S} from the last "
        f"{min(protos.rejections, cp.noise_buffer)} rejection(s); a text at cosine >= {cp.noise_threshold} to one is rejected"
    )
    t = Table()
    for col in ("#", "size", "nearest rejected texts"):
        t.add_column(col, overflow="fold")
    for i, p in enumerate(protos.examples, start=1):
        t.add_row(str(i), str(p["size"]), "\n".join(x.replace("\n", " ")[:120] for x in p["texts"]))
    console.print(t)
