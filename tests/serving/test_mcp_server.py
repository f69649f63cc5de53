"""`pai mcp` as an assistant meets it: a subprocess driven by the MCP SDK's own client over stdio, in front of a
real service on a real Postgres: tools listed, context on an ingested folder, feedback citing [2] labels the log,
a captured fact found by context afterwards, hostile arguments answered as MCP errors."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from serving.server import BackgroundServer

REPO = Path(__file__).resolve().parents[2]
NOTES = {
    "bees.md": "# Bees\n\nHoney bees store nectar as honey in wax combs inside the hive.",
    "wasps.md": "# Wasps\n\nWasps build paper nests from chewed wood fibre and do not make honey.",
    "ants.md": "# Ants\n\nSome ants farm aphids for their sweet honeydew, a sugary liquid.",
    "rivers.md": "# Rivers\n\nA river delta forms where sediment settles as the current slows at the sea.",
}
FACT = (
    "Postgres autovacuum reclaims dead tuples and updates planner statistics; on busy tables lower "
    "autovacuum_vacuum_scale_factor to 0.05 so it runs before bloat builds up."
)


@pytest.fixture
def service_url(db_url, embedder, tmp_path, similarity_service):
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    with connect(db_url) as conn:
        ingest_paths(conn, [folder], IngestParams(), SearchParams(), embedder)
    with BackgroundServer(similarity_service()) as srv:
        yield srv.url


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def drive(url: str, steps):
    params = StdioServerParameters(command=sys.executable, args=["-m", "cli.main", "mcp", "--url", url], cwd=str(REPO))
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await steps(session)


def test_an_assistant_drives_the_memory_over_stdio(service_url, db_url):
    async def steps(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"context", "feedback", "capture", "remember", "staging_file"}
        assert "[n]" in tools["context"].description

        r = await session.call_tool("context", {"query": "where do bees keep honey?"})
        assert not r.is_error, text_of(r)
        body = text_of(r)
        qid = int(re.search(r"query_id: (\d+)", body).group(1))
        cited = [int(n) for n in re.findall(r"^\[(\d+)\] ", body, flags=re.M)]
        assert 2 in cited and "bees.md" in body and "Honey bees store nectar" in body
        staged = await session.call_tool("staging_file", {"query_id": qid})
        assert not staged.is_error and "where do bees keep honey?" in text_of(staged)

        r = await session.call_tool("feedback", {"query_id": qid, "answer": "In wax combs [2]."})
        assert not r.is_error and "[2]" in text_of(r), text_of(r)

        r = await session.call_tool("capture", {"user": "how do I keep autovacuum ahead?", "assistant": FACT})
        assert not r.is_error and re.match(r"capture \d+: pending", text_of(r)), text_of(r)
        deadline = time.monotonic() + 60
        found = ""
        while time.monotonic() < deadline and "autovacuum_vacuum_scale_factor" not in found:
            await anyio.sleep(0.3)
            found = text_of(await session.call_tool("context", {"query": "autovacuum scale factor on busy tables"}))
        assert "autovacuum_vacuum_scale_factor" in found

        r = await session.call_tool(
            "remember", {"text": "The team's standup is at 9:30 in room Kepler.", "title": "standup"}
        )
        assert not r.is_error and re.match(r"stored webhook:mcp-standup-[0-9a-f]{10}:", text_of(r)), text_of(r)

        hostile = [
            ("context", {"query": "bees\x00"}),
            ("context", {"query": "x" * 5000}),
            ("context", {"query": 42}),
            ("context", {"query": "bees", "k": 0}),
            ("context", {"query": "bees", "k": True}),
            ("feedback", {"query_id": -1, "answer": "x"}),
            ("feedback", {"query_id": "1", "answer": "x"}),
            ("feedback", {"query_id": qid, "rating": 5}),
            ("feedback", {"query_id": 10**12, "answer": "x"}),
            ("feedback", {"query_id": qid}),
            ("capture", {"user": "q", "assistant": "ok\x00"}),
            ("capture", {"user": "q", "assistant": "x" * 50_001}),
            ("remember", {"text": ""}),
            ("staging_file", {"query_id": 999_999}),
            ("no_such_tool", {}),
        ]
        errors = []
        for name, args in hostile:
            r = await session.call_tool(name, args)
            assert r.is_error, (name, args, text_of(r))
            errors.append(text_of(r))
        assert all(e and "Traceback" not in e for e in errors)
        # still serving after all that
        assert not (await session.call_tool("context", {"query": "river delta"})).is_error
        return qid

    qid = anyio.run(drive, service_url, steps)
    with connect(db_url) as conn:
        rows = dict(conn.execute("SELECT rank, used FROM query_candidates WHERE query_id = %s", (qid,)).fetchall())
    assert rows[2] is True  # the citation labelled the log
    assert all(used is False for rank, used in rows.items() if rank != 2 and used is not None)


def test_text_checks_refuse_what_a_route_would():
    """A lone surrogate cannot be sent by the SDK's client (it will not encode it); JSON from elsewhere can."""
    from mcp.server.mcpserver.exceptions import ToolError

    from serving.mcp_server import _checked, _int

    for bad in ("\ud800", "a\x00b", "", "   ", 3, None):
        with pytest.raises(ToolError):
            _checked("text", bad, 100)
    assert _checked("text", None, 100, required=False) is None
    with pytest.raises(ToolError, match="over the 5 limit"):
        _checked("text", "abcdef", 5)
    for bad in (True, "1", 1.0, 0, 2**63):
        with pytest.raises(ToolError):
            _int("query_id", bad, 1, 2**63 - 1)
