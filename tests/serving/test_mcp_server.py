"""`pai mcp` as an assistant meets it: a subprocess driven by the MCP SDK's own client over stdio, in front of a
real service on a real Postgres: tools listed, context on an ingested folder, feedback citing [2] labels the log,
a captured fact read back and found by context afterwards, hostile arguments answered as MCP errors. Then the
tools in-process (the SDK's in-memory client): what they tell a model (hints, limits, structured results, the
server's version and capabilities), ordinary titles remembered, raw strings kept raw, the staging dir honoured."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from pathlib import Path

import anyio
import mcp
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.params import IngestParams, SearchParams
from serving.client import Client
from serving.mcp_server import ToolFailure, build_mcp, inside, note_source, version
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
TITLES = [  # what people call their notes; each once made "422: source: holds a secret"
    "AWS setup",
    "TODO list",
    "Team offsite 2025",
    "Mom's birthday",
    "Q3 planning",
    "Kubernetes cluster notes",
    "GitHub Actions CI",
    "Password manager migration",
    "API design review",
    "SSH config",
    "Stripe billing",
    "OAuth flow",
    "Token bucket rate limiter",
    "Secret Santa 2025",
    "Dentist appointment",
    "GCP billing alerts",
    "Azure AD groups",
    "Docker compose tips",
    "Postgres tuning",
    "Private key rotation runbook",
    "Meeting with Sam",
    "Grocery list",
    "Trip to Lisbon",
    "1:1 with manager",
    "Recipe: lasagna",
    "Reading notes - DDIA",
    "Home wifi setup",
    "Car insurance renewal",
    "Credentials for prod",
    "Vault unseal procedure",
    "Bitcoin wallet backup",
    "Café Zürich ☕ menu",
]
GH = "ghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"  # a GitHub token's shape


@pytest.fixture
def service(db_url, embedder, tmp_path, first_stage_service):
    """The notes ingested and a first-stage service on loopback whose staging dir is not named "staging":
    (its url, its staging dir)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    with connect(db_url) as conn:
        ingest_paths(conn, [folder], IngestParams(), SearchParams(), embedder)
    staging = tmp_path / "query-files"
    with BackgroundServer(first_stage_service(staging=staging)) as srv:
        yield srv.url, staging


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def drive(url: str, staging: Path, steps):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cli.main", "mcp", "--url", url, "--staging-dir", str(staging)],
        cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await steps(session)


def in_process(url: str, staging: Path, steps):
    async def run():
        with Client(url) as client:
            async with mcp.Client(build_mcp(client, staging)) as session:
                return await steps(session)

    return anyio.run(run)


def test_an_assistant_drives_the_memory_over_stdio(service, db_url):
    async def steps(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"context", "expand", "feedback", "capture", "capture_result", "remember", "staging_file"}
        assert "[n]" in tools["context"].description

        r = await session.call_tool("context", {"query": "where do bees keep honey?"})
        assert not r.is_error, text_of(r)
        body = text_of(r)
        qid = int(re.search(r"query_id: (\d+)", body).group(1))
        cited = [int(n) for n in re.findall(r"^\[(\d+)\] ", body, flags=re.M)]
        assert 2 in cited and "bees.md" in body and "Honey bees store nectar" in body
        assert r.structured_content["query_id"] == qid and [c["n"] for c in r.structured_content["chunks"]] == cited
        staged = await session.call_tool("staging_file", {"query_id": qid})
        assert not staged.is_error and "where do bees keep honey?" in text_of(staged), text_of(staged)

        r = await session.call_tool("feedback", {"query_id": qid, "answer": "In wax combs [2]."})
        assert not r.is_error and "[2]" in text_of(r), text_of(r)
        r = await session.call_tool("feedback", {"query_id": qid, "answer": "In wax combs [2], not [99]."})
        assert r.structured_content["unknown"] == [99] and "[99] no candidate" in text_of(r), text_of(r)
        r = await session.call_tool("feedback", {"query_id": qid, "answer": "See [99]."})
        assert not r.is_error and r.structured_content["answer_recorded"] is False
        assert "nothing labelled" in text_of(r) and "cite only the [n]" in text_of(r)

        r = await session.call_tool("capture", {"user": "how do I keep autovacuum ahead?", "assistant": FACT})
        assert not r.is_error and re.match(r"capture \d+: ", text_of(r)), text_of(r)
        capture_id = r.structured_content["id"]
        deadline = time.monotonic() + 60
        while r.structured_content["status"] == "pending" and time.monotonic() < deadline:
            await anyio.sleep(0.3)
            r = await session.call_tool("capture_result", {"capture_id": capture_id})
        assert r.structured_content["status"] == "stored" and r.structured_content["fact_ids"], text_of(r)
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
            ("context", {"query": "bees", "kk": 3}),
            ("feedback", {"query_id": -1, "answer": "x"}),
            ("feedback", {"query_id": "1", "answer": "x"}),
            ("feedback", {"query_id": qid, "rating": 5}),
            ("feedback", {"query_id": 10**12, "answer": "x"}),
            ("feedback", {"query_id": qid}),
            ("capture", {"user": "q", "assistant": "ok\x00"}),
            ("capture", {"user": "q", "assistant": "x" * 50_001}),
            ("capture_result", {"capture_id": 999_999}),
            ("remember", {"text": ""}),
            ("staging_file", {"query_id": 999_999}),
            ("no_such_tool", {}),
        ]
        errors = []
        for name, args in hostile:
            r = await session.call_tool(name, args)
            assert r.is_error, (name, args, text_of(r))
            errors.append(text_of(r))
        assert all(e and "Traceback" not in e and "\n" not in e for e in errors), errors
        # still serving after all that
        assert not (await session.call_tool("context", {"query": "river delta"})).is_error
        return qid

    qid = anyio.run(drive, *service, steps)
    with connect(db_url) as conn:
        rows = dict(conn.execute("SELECT rank, used FROM query_candidates WHERE query_id = %s", (qid,)).fetchall())
    assert rows[2] is True  # the citation labelled the log, and [99] did not undo it
    assert all(used is False for rank, used in rows.items() if rank != 2 and used is not None)


def test_the_tools_tell_a_model_what_it_may_do(service):
    """Hints, limits and structured results a model can act on; the server's version; only tools advertised."""

    async def steps(session):
        assert session.server_info.version == version() != ""
        caps = session.server_capabilities
        assert caps.tools is not None and caps.prompts is None and caps.resources is None
        tools = {t.name: t for t in (await session.list_tools()).tools}
        hints = {
            n: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.idempotent_hint)
            for n, t in tools.items()
        }
        assert hints == {
            "context": (True, None, False),
            "expand": (False, False, True),  # marks the preview read in the log; reading twice changes nothing
            "feedback": (False, True, True),
            "capture": (False, True, False),
            "capture_result": (True, None, True),
            "remember": (False, True, True),
            "staging_file": (True, None, True),
        }
        for t in tools.values():  # every parameter explained
            assert all(p.get("description") for p in t.input_schema["properties"].values()), t.name
        k = tools["context"].input_schema["properties"]["k"]
        assert "token budget" in k["description"] and {"minimum": 1, "maximum": 20}.items() <= k["anyOf"][0].items()
        assert tools["context"].input_schema["properties"]["query"]["maxLength"] == 4000
        out = tools["context"].output_schema
        assert {"query_id", "chunks"} <= set(out["properties"]) and "query_id" in out["required"]

        r = await session.call_tool("context", {"query": "where do bees keep honey?", "k": 2})
        s = r.structured_content
        assert [c["n"] for c in s["chunks"]] == [1, 2] and s["chunks"][0]["source"].endswith("bees.md")
        assert f"query_id: {s['query_id']}" in text_of(r) and "[2] " in text_of(r)
        return s["query_id"]

    in_process(*service, steps)


def test_raw_strings_stay_raw(service, db_url):
    """A string that looks like JSON is text: "[1]" is an answer citing [1], "null" an answer, not a missing one."""

    async def steps(session):
        qid = (await session.call_tool("context", {"query": "where do bees keep honey?"})).structured_content[
            "query_id"
        ]
        r = await session.call_tool("feedback", {"query_id": qid, "answer": "[1]"})
        assert not r.is_error and r.structured_content["used_ranks"] == [1], text_of(r)
        r = await session.call_tool("feedback", {"query_id": qid, "answer": "null", "correction": '{"a": 1}'})
        assert not r.is_error and r.structured_content["replaced"]["answer"] == "[1]", text_of(r)
        for title in ("[1]", "null", "42", '{"a": 1}', "true"):
            r = await session.call_tool("remember", {"text": f"A note titled {title}.", "title": title})
            assert not r.is_error, text_of(r)
        r = await session.call_tool("capture", {"user": "[1]", "assistant": FACT, "source": "null", "session": "[]"})
        assert not r.is_error, text_of(r)
        return qid

    qid = in_process(*service, steps)
    with connect(db_url) as conn:
        assert conn.execute("SELECT answer, correction FROM queries WHERE id = %s", (qid,)).fetchone() == (
            "null",
            '{"a": 1}',
        )
        headings = {h for (h,) in conn.execute("SELECT heading FROM chunks WHERE source LIKE 'webhook:mcp-%'")}
    assert {"[1]", "null", "42", '{"a": 1}', "true"} <= headings


def test_remember_takes_ordinary_titles_and_never_stores_a_secret(service, db_url, all_text):
    secret_title = f"Deploy token {GH}"

    async def steps(session):
        for title in TITLES + [secret_title]:
            r = await session.call_tool("remember", {"text": f"What to know about {title.lower()}.", "title": title})
            assert not r.is_error, (title, text_of(r))
            assert re.fullmatch(r"webhook:mcp-[a-z0-9-]+-[0-9a-f]{10}", r.structured_content["source"]), title
        again = await session.call_tool("remember", {"text": "Rewritten: what to know.", "title": "AWS setup"})
        assert again.structured_content["source"] == f"webhook:{note_source('AWS setup', '')}"

    in_process(*service, steps)
    with connect(db_url) as conn:
        headings = [h for (h,) in conn.execute("SELECT heading FROM chunks WHERE source LIKE 'webhook:mcp-%'")]
        aws = conn.execute("SELECT text FROM chunks WHERE heading = 'AWS setup'").fetchall()
        stored = all_text(conn)
    assert sorted(h for h in headings if "REDACTED" not in h) == sorted(TITLES)  # each title is its note's heading
    assert [h for h in headings if "REDACTED" in h] == ["Deploy token [REDACTED:GITHUB_TOKEN]"]
    assert aws == [("Rewritten: what to know.",)]  # the same title replaced its note
    assert GH not in stored


def test_a_note_too_long_for_one_call_is_refused_in_one_line_and_nothing_stored(service, db_url):
    """A 1 MB note took longer than a client's 60 s request timeout to store: the schema caps a note at what one
    call stores in time, and the error says where a longer document goes."""

    async def steps(session):
        r = await session.call_tool("remember", {"text": "x " * 100_001, "title": "Too long"})
        assert r.is_error
        return text_of(r)

    text = in_process(*service, steps)
    assert "200000" in text.replace(",", "") and len(text.splitlines()) == 1, text
    with connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM chunks WHERE heading = 'Too long'").fetchone() == (0,)


def test_a_note_source_cannot_read_as_a_secret():
    digest = hashlib.sha256(b"AWS setup").hexdigest()[:10]
    assert note_source("AWS setup", "text") == f"mcp-aws-setup-{digest}"
    assert note_source("  ", "the text") == f"mcp-note-{hashlib.sha256(b'the text').hexdigest()[:10]}"
    secret = note_source(f"key {GH}", "t")
    assert GH.lower() not in secret and secret.startswith("mcp-key-redacted-github-token-")


def test_staging_file_reads_only_under_the_staging_dir(service, tmp_path):
    root = tmp_path / "my queries"  # any name: not only a folder called "staging"
    (root / "2026-12-01").mkdir(parents=True)
    good = root / "2026-12-01" / "101500-bees-7.md"
    good.write_text("# Query: bees")
    (tmp_path / "secret.md").write_text("not a staging file")
    (root / "2026-12-01" / "link.md").symlink_to(tmp_path / "secret.md")
    (root / "notes.txt").write_text("x")
    assert inside(str(good), root) == good.resolve()
    for bad in (
        root / ".." / "secret.md",  # traversal
        root / "2026-12-01" / "link.md",  # a symlink out of it
        root / "notes.txt",  # not markdown
        root / "missing.md",
        root / "2026-12-01",  # a folder
    ):
        with pytest.raises(ToolFailure):
            inside(str(bad), root)

    async def steps(session):  # the service's staging dir is "query-files": read, not refused
        qid = (await session.call_tool("context", {"query": "river delta"})).structured_content["query_id"]
        r = await session.call_tool("staging_file", {"query_id": qid})
        assert not r.is_error and "# Query: river delta" in text_of(r), text_of(r)

    in_process(*service, steps)
