"""Scopes over HTTP and MCP, against the real app and the real embedded Postgres: a token for one scope never reads
or writes another (search results, learned answers, feedback ids, capture ids, stats, staging files), a shared scope
is read by both, the loopback owner keeps today's behaviour, and a hostile scope name on any field is a one-line
422 with nothing stored."""

import httpx
import mcp
import pytest

from serving.client import Client
from serving.mcp_server import build_mcp
from serving.server import BackgroundServer

ALICE, BOB, TEAM, ADMIN = ("alice-" + "a" * 20, "bob-" + "b" * 20, "team-" + "t" * 20, "admin-" + "z" * 20)
TOKENS = f"""
- token: {ALICE}
  default: alice/notes
  read: ["alice/*", "team/shared"]
  write: ["alice/*"]
  shared: ["team/shared"]
- token: {BOB}
  default: bob
  read: ["bob/*", "team/shared"]
  write: ["bob/*"]
  shared: ["team/shared"]
- token: {TEAM}
  default: team/shared
  write: ["team/*"]
- token: {ADMIN}
  admin: true
"""
NOTES = {
    ALICE: "# Kiwi\n\nAlice waters the kiwi orchard every Tuesday at dawn.",
    BOB: "# Kiwi\n\nBob's kiwi budget for the quarter is forty euros.",
    TEAM: "# Kiwi\n\nThe team handbook: kiwi is the code name of the billing service.",
}
HOSTILE = ["..", "alice/..", "a\x00b", "x" * 10_000, "\u0430lice", "alice\uff0fnotes", "Alice", "a//b", "/", 7, ""]


def auth(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def server(first_stage_service, tmp_path, monkeypatch):
    """A service beyond loopback with the scoped tokens above, each note stored by its own token."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS)
    monkeypatch.setenv("PAI_TOKENS_FILE", str(tokens))
    for name in ("PAI_READ_TOKEN", "PAI_WRITE_TOKEN", "PAI_ADMIN_TOKEN", "PAI_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    with BackgroundServer(first_stage_service(host="0.0.0.0")) as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
        for token, text in NOTES.items():
            r = c.post("/ingest", json={"source": "kiwi", "text": text}, headers=auth(token))
            assert r.status_code == 200, r.text
        yield srv, c


def texts(client: httpx.Client, token: str, **body) -> tuple[int, set[str], dict]:
    r = client.post("/query", json={"query": "kiwi", **body}, headers=auth(token))
    return r.status_code, {c["text"] for c in r.json().get("context", [])}, r.json()


def test_each_token_reads_its_scope_and_the_shared_one_only(server):
    _, client = server
    _, alice, body = texts(client, ALICE)
    assert body["scope"] == "alice/notes" and body["scopes_read"] == ["alice/notes", "team/shared"]
    assert any("orchard" in t for t in alice) and any("handbook" in t for t in alice)
    assert not any("budget" in t for t in alice)
    _, bob, _ = texts(client, BOB)
    assert (
        any("budget" in t for t in bob) and any("handbook" in t for t in bob) and not any("orchard" in t for t in bob)
    )
    _, team, _ = texts(client, TEAM)  # what it may write it may read; nothing is shared with it
    assert all("handbook" in t for t in team) and team
    _, everything, _ = texts(client, ADMIN, scope="bob")
    assert everything == {t for t in bob if "budget" in t}  # an admin names the scope it reads
    for token, scope in ((ALICE, "bob"), (BOB, "alice/notes"), (TEAM, "alice/notes"), (ALICE, "alicebob")):
        status, _, refused = texts(client, token, scope=scope)
        assert status == 403 and refused == {"error": f"scope {scope}: this token may not read it"}


def test_no_write_crosses_a_scope(server, conn):
    _, client = server
    before = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    for path, body in (
        ("/ingest", {"source": "x", "text": "# X\n\nplanted by alice", "scope": "bob"}),
        ("/capture", {"user": "q", "assistant": "Bob's bike is red.", "scope": "bob"}),
        ("/ingest", {"source": "x", "text": "# X\n\nplanted by alice", "scope": "team/shared"}),  # read, not write
    ):
        r = client.post(path, json=body, headers=auth(ALICE))
        assert r.status_code == 403 and "may not write" in r.json()["error"], r.text
    assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == before
    assert conn.execute("SELECT count(*) FROM captures").fetchone()[0] == 0
    r = client.post(
        "/ingest", json={"source": "y", "text": "# Y\n\nalice's second", "scope": "alice/work"}, headers=auth(ALICE)
    )
    assert r.status_code == 200 and r.json()["scope"] == "alice/work"  # alice/* covers it


def test_feedback_and_capture_ids_of_another_scope_are_unknown_ids(server, conn):
    _, client = server
    _, _, body = texts(client, ALICE)
    qid = body["query_id"]
    (last,) = conn.execute("SELECT max(id) FROM queries").fetchone()
    fb = {"query_id": qid, "rating": 1, "answer": "Tuesday [1]."}
    theirs = client.post("/feedback", json=fb, headers=auth(BOB))
    unknown = client.post("/feedback", json={**fb, "query_id": last + 1000}, headers=auth(BOB))
    assert theirs.status_code == unknown.status_code == 404
    assert (
        theirs.json()["error"] == f"unknown query id {qid}"
        and unknown.json()["error"] == f"unknown query id {last + 1000}"
    )
    named = client.post("/feedback", json={**fb, "scope": "alice/work"}, headers=auth(ALICE))  # not its scope
    assert named.status_code == 404
    assert conn.execute("SELECT rating, answer FROM queries WHERE id = %s", (qid,)).fetchone() == (None, None)
    assert conn.execute("SELECT count(*) FROM learned_qa").fetchone()[0] == 0
    assert client.post("/feedback", json=fb, headers=auth(ALICE)).status_code == 200
    # the learned answer alice planted is hers: bob's same question does not see it
    assert texts(client, ALICE)[2]["learned"] and not texts(client, BOB)[2]["learned"]

    r = client.post(
        "/capture",
        json={"user": "where?", "assistant": "Alice's spare key is under the blue pot."},
        headers=auth(ALICE),
    )
    cid = r.json()["id"]
    assert client.get(f"/capture/{cid}", headers=auth(ALICE)).status_code == 200
    for token in (BOB, TEAM):
        theirs = client.get(f"/capture/{cid}", headers=auth(token))
        assert theirs.status_code == 404 and theirs.json() == {"error": f"unknown capture id {cid}"}
    assert conn.execute("SELECT scope FROM captures WHERE id = %s", (cid,)).fetchone() == ("alice/notes",)


def test_stats_count_only_the_readable_scopes(server):
    _, client = server
    for _ in range(2):
        texts(client, ALICE)
    texts(client, BOB)
    stats = lambda token: client.get("/stats", headers=auth(token)).json()  # noqa: E731
    assert stats(ALICE)["queries"] == 2 and stats(BOB)["queries"] == 1 and stats(ADMIN)["queries"] == 3
    assert stats(BOB)["trial"] is None and stats(BOB)["maintenance"] is None


@pytest.mark.parametrize("scope", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_scope_on_any_field_is_one_line_and_stores_nothing(server, conn, scope):
    _, client = server
    count = lambda: conn.execute(  # noqa: E731
        "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM queries), (SELECT count(*) FROM captures)"
    ).fetchone()
    before = count()
    for path, body in (
        ("/query", {"query": "kiwi"}),
        ("/ingest", {"source": "h", "text": "# H\n\nhostile"}),
        ("/capture", {"user": "u", "assistant": "Alice's car is green."}),
        ("/feedback", {"query_id": 1, "rating": 1}),
    ):
        r = client.post(path, json={**body, "scope": scope}, headers=auth(ADMIN))
        assert r.status_code == 422, (path, r.text)
        why = r.json()["error"]
        assert why.startswith("scope") and "\n" not in why and len(why) < 300 and "\x00" not in why, why
    assert count() == before


def test_the_loopback_owner_keeps_todays_behaviour(first_stage_service, monkeypatch, tmp_path):
    for name in ("PAI_TOKENS_FILE", "PAI_READ_TOKEN", "PAI_WRITE_TOKEN", "PAI_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with BackgroundServer(first_stage_service()) as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
        assert c.post("/ingest", json={"source": "k", "text": NOTES[ALICE]}).json()["scope"] == "default"
        assert c.post("/ingest", json={"source": "k", "text": NOTES[BOB], "scope": "bob"}).status_code == 200
        r = c.post("/query", json={"query": "kiwi"}).json()
        assert r["scope"] == "default" and all("orchard" in x["text"] for x in r["context"])
        assert any(
            "budget" in x["text"] for x in c.post("/query", json={"query": "kiwi", "scope": "bob"}).json()["context"]
        )


def mcp_session(url: str, token: str, staging, steps, scope: str | None = None):
    import anyio

    async def run():
        with Client(url, token=token, scope=scope) as client:
            async with mcp.Client(build_mcp(client, staging)) as session:
                return await steps(session)

    return anyio.run(run)


def test_over_mcp_a_token_never_reads_or_writes_another_scope(server, tmp_path):
    srv, _ = server
    staging = tmp_path / "staging"
    said = lambda r: "\n".join(c.text for c in r.content if getattr(c, "type", None) == "text")  # noqa: E731

    async def alice(session):
        ctx = await session.call_tool("context", {"query": "kiwi"})
        text = said(ctx)
        assert "orchard" in text and "handbook" in text and "budget" not in text
        qid = ctx.structured_content["query_id"]
        own = await session.call_tool("staging_file", {"query_id": qid})
        assert not own.is_error and "orchard" in said(own) and '"scope": "alice/notes"' in said(own)
        other = await session.call_tool("staging_file", {"query_id": qid, "scope": "alice/work"})
        assert other.is_error and "not answered by this server" in said(other)
        for tool, args in (
            ("context", {"query": "kiwi", "scope": "bob"}),
            ("remember", {"text": "planted", "title": "x", "scope": "bob"}),
            ("capture", {"user": "u", "assistant": "Bob's bike is red.", "scope": "bob"}),
        ):
            r = await session.call_tool(tool, args)
            assert r.is_error and "403" in said(r) and "\n" not in said(r), (tool, said(r))
        for bad in HOSTILE:
            r = await session.call_tool("context", {"query": "kiwi", "scope": bad})
            assert r.is_error and said(r).startswith("scope") and "\n" not in said(r), said(r)
        stored = await session.call_tool(
            "remember", {"text": "Alice's locker code is in the drawer.", "title": "locker"}
        )
        assert not stored.is_error
        return qid

    qid = mcp_session(srv.url, ALICE, staging, alice)

    async def bob(session):
        ctx = await session.call_tool("context", {"query": "locker code kiwi"})
        assert "orchard" not in said(ctx) and "locker" not in said(ctx) and "budget" in said(ctx)
        r = await session.call_tool("staging_file", {"query_id": qid})
        assert r.is_error and "not answered by this server" in said(r)
        fb = await session.call_tool("feedback", {"query_id": qid, "answer": "x [1]"})
        assert fb.is_error and said(fb) == f"404: unknown query id {qid}"

    mcp_session(srv.url, BOB, staging, bob)

    async def default_scope(session):  # the server's own scope (`PAI_SCOPE`, `Client(scope=)`) is its default
        ctx = await session.call_tool("context", {"query": "locker"})
        assert "locker" not in said(ctx)

    mcp_session(srv.url, ALICE, staging, default_scope, scope="alice/work")
