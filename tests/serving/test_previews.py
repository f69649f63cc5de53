"""Previews (issue 55): after the context the service lists the next candidates one line each, `expand` reads one
whole, and what the consumer read or cited of them is a label below the context's cut, with the propensity of
being listed. On a real Postgres with the real MiniLM: the picker's propensities against its own draws, the log's
labels of each kind of exposure, the pull's record and the trainer's reading of it, the staging file, and hostile
`expand` calls over HTTP (one-line errors that reveal nothing)."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from retrieval.corpus.ingest import ingest_paths
from retrieval.db import connect
from retrieval.logs import feedback
from retrieval.logs.feedback_records import ipw
from retrieval.params import IngestParams, SearchParams, UsedParams
from retrieval.query import staging
from retrieval.query.previews import following, preview_line
from retrieval.query.search import Candidate
from serving.client import Client, ClientError
from serving.picker import Picker
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer
from serving.service import in_process, run_query
from training.feedback_rankings import rankings
from training.pull import PullParams, pull

TOPICS = [
    ("bees", "Honey bees store nectar as honey in wax combs inside the hive."),
    ("wasps", "Wasps build paper nests from chewed wood fibre and do not make honey."),
    ("ants", "Some ants farm aphids for their sweet honeydew, a sugary liquid."),
    ("hornets", "Hornets are large wasps that hunt other insects, bees among them, near the hive."),
    ("beekeeping", "A beekeeper smokes the hive before lifting the frames of comb to harvest honey."),
    ("pollen", "Bees carry pollen in baskets on their hind legs back to the colony."),
    ("mead", "Mead is a wine fermented from honey, water and yeast."),
    ("bumblebees", "Bumblebees nest in the ground and store little honey in wax pots."),
    ("rivers", "A river delta forms where sediment settles as the current slows at the sea."),
    ("compilers", "A compiler parses source code into a syntax tree and emits machine code."),
    ("tides", "Tides rise and fall twice a day, pulled by the moon."),
    ("volcanoes", "Volcanoes erupt molten rock that cools into basalt."),
]


def cand(rank: int, text: str = "words", heading: str | None = None, source: str = "/notes/a.md") -> Candidate:
    return Candidate(rank, rank, source, heading, None, 1, 2, text, f"h{rank}", 0.5, 10)


def test_previews_follow_the_context_in_the_served_order_then_the_first_stage():
    shown = [cand(r) for r in range(1, 9)]
    served_order = [shown[i] for i in (4, 1, 0, 6)]  # a selector's order: 5, 2, 1, 7
    context = served_order[:2]
    assert [c.rank for c in following(context, served_order, shown, 4)] == [1, 7, 3, 4]
    assert following(context, served_order, shown, 0) == []
    assert len(following(context, served_order, shown, 100)) == 6  # never one twice, never one of the context


def test_a_preview_is_one_bounded_line_whatever_the_chunk_holds():
    c = cand(3, "# Hive\n\nBees\x0b keep\n\n honey " + "word " * 400 + "\u202e", heading="Hive", source="/n/bees.md")
    line = preview_line(c, 100)
    assert line.startswith("Hive: Bees keep honey word") and line.endswith("…")
    assert len(line) <= 100 and "\n" not in line
    assert preview_line(cand(1, "short"), 100) == "a.md: short"


def test_preview_propensities_are_the_policy_s_own_frequencies():
    """With exploration, which candidates are previewed depends on the draw: the logged P(previewed) matches how often
    the picker's own draws list each one (3,000 draws; each frequency within 0.03)."""
    shown = [cand(r) for r in range(1, 13)]
    picker = Picker(FirstStageSelector(), explore_rate=0.3, seed=5, previews=4, token_budget=30, min_chunks=3)
    seen: Counter = Counter()
    n = 3000
    for _ in range(n):
        s = picker.serve("q", shown)
        seen.update(c.rank for c in s.previews)
    p = s.preview_propensity
    assert [c.rank for c in s.context][:2] == [1, 2] and abs(sum(p.values()) - 4) < 1e-4
    for rank in range(1, 13):
        assert abs(seen[rank] / n - p.get(rank, 0.0)) < 0.03, (rank, seen[rank] / n, p.get(rank))
    assert p[3] == pytest.approx(0.3) and p[4] == pytest.approx(1 - 0.3 / 9)  # the slot exploration took; the next
    none = Picker(FirstStageSelector(), previews=4, token_budget=30, min_chunks=3).serve("q", shown)
    assert none.preview_propensity == {4: 1.0, 5: 1.0, 6: 1.0, 7: 1.0} and [c.rank for c in none.previews] == [
        4,
        5,
        6,
        7,
    ]


def test_the_log_marks_previewed_only_what_was_listed(notes, db_url, first_stage_service):
    """The policy's propensities name every candidate that could be listed; the log marks `previewed` only those this
    query listed (each with its chance), so no unlisted candidate becomes a label, citable or expandable."""
    picker = Picker(
        FirstStageSelector(), timeout_s=5, token_budget=60, min_chunks=3, previews=4, seed=3, explore_rate=0.5
    )
    service = first_stage_service(picker=picker)
    with in_process(service):
        bodies = [run_query(service, "where do bees keep their honey?", inline=True) for _ in range(12)]
    lists = set()
    for body in bodies:
        got = labels(db_url, body["query_id"])
        listed = sorted(v["rank"] for v in body["previews"])
        lists.add(tuple(listed))
        assert sorted(r for r, v in got.items() if v[1]) == listed
        assert all(0 < got[r][2] <= 1 for r in listed) and all(got[r][2] == 0 for r in got if r not in listed)
        unlisted = min(r for r in got if r not in listed and not got[r][0])
        with connect(db_url) as conn, pytest.raises(feedback.FeedbackError):
            feedback.expand(conn, body["query_id"], unlisted)
    assert len(lists) > 1  # exploration's draws vary what is listed


@pytest.fixture
def notes(tmp_path, db_url, embedder):
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in TOPICS:
        (folder / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n")
    with connect(db_url) as conn:
        ingest_paths(conn, [folder], IngestParams(), SearchParams(), embedder)
    return folder


def previewing(first_stage_service, **kw):
    picker = Picker(FirstStageSelector(), timeout_s=5, token_budget=60, min_chunks=3, previews=5)
    return first_stage_service(picker=picker, **kw)


def labels(db_url, qid: int) -> dict[int, tuple]:
    with connect(db_url) as conn:
        rows = conn.execute(
            "SELECT rank, shown, previewed, preview_propensity, expanded, used FROM query_candidates"
            " WHERE query_id = %s",
            (qid,),
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def test_each_kind_of_exposure_gets_its_label_and_the_trainer_reads_it(notes, db_url, first_stage_service, tmp_path):
    service = previewing(first_stage_service)
    with in_process(service):
        body = run_query(service, "where do bees keep their honey?", inline=True)
    qid, context = body["query_id"], [c["rank"] for c in body["context"]]
    previews = [v["rank"] for v in body["previews"]]
    assert len(context) == 3 and len(previews) == 5 and not set(context) & set(previews)
    assert all(len(v["preview"]) <= service.search.preview_chars for v in body["previews"])
    # the staging file says which were given whole and which as previews
    sf = staging.read(staging_path := __import__("pathlib").Path(body["staging_file"]))
    assert sf.context == tuple(context) and sf.previews == tuple(previews)
    assert f"## {previews[0]}. " in (text := staging_path.read_text()) and "· preview" in text

    read, cited_unread, left = previews[0], previews[1], previews[2]
    with connect(db_url) as conn:
        whole = feedback.expand(conn, qid, read)
        again = feedback.expand(conn, qid, read)  # reading twice changes nothing
        feedback.record_feedback(conn, qid, answer=f"Wax combs [{context[0]}], and see [{cited_unread}].")
    assert whole == again and whole.rank == read and whole.text and whole.date
    got = labels(db_url, qid)
    assert got[context[0]][-1] is True and got[context[1]][-1] is False  # cited / shown and not cited
    assert got[read][-2:] == (True, False)  # read whole and not cited: ignored
    assert got[cited_unread][-1] is True  # a preview's [n] cited: used
    assert got[left][-1] is None and got[left][1:3] == (True, 1.0)  # listed, never read: no label
    beyond = [r for r in got if r not in context and r not in previews]
    assert all(got[r][1] is False and got[r][-1] is None for r in beyond)

    out = tmp_path / "pulled"
    pull(PullParams(out=str(out), lag_seconds=0.0), url=db_url)
    rec = next(r for r in map(__import__("json").loads, (out / "feedback.jsonl").open()) if r["query_id"] == qid)
    by_rank = {c["rank"]: c for c in rec["candidates"]}
    assert by_rank[read]["expanded"] is True and by_rank[read]["previewed"] is True and by_rank[read]["used"] is False
    assert (
        ipw(by_rank[cited_unread], 0.05) == 1.0
        and ipw({**by_rank[cited_unread], "preview_propensity": 0.25}, 0.05) == 4
    )
    # the trainer's rankings: the cited preview is a positive below the cut
    ranked = [g for s in ("train", "val") for g in rankings([rec], s, 0.5)]
    assert len(ranked) == 1
    positions = sorted(c["rank"] for c in rec["candidates"] if c["text"] is not None)
    assert {positions[i] for i in ranked[0]["used"]} == {context[0], cited_unread}
    assert UsedParams()  # the one definition reads them through used_labels in train_ranker (tests/training)


def test_previews_follow_the_context_k_cut(notes, db_url, first_stage_service):
    service = previewing(first_stage_service)
    with in_process(service):
        body = run_query(service, "where do bees keep their honey?", inline=True, k=1)
    got = labels(db_url, body["query_id"])
    assert len(body["context"]) == 1 and len(body["previews"]) == 5
    assert [r for r, v in got.items() if v[0]] == [body["context"][0]["rank"]]  # the cut ones: previews, not shown
    assert sorted(r for r, v in got.items() if v[1]) == sorted(v["rank"] for v in body["previews"])


def test_expand_over_http_and_the_client_and_hostile_calls(notes, db_url, first_stage_service):
    with BackgroundServer(previewing(first_stage_service)) as srv, Client(srv.url) as pai:
        ctx = pai.context("where do bees keep their honey?")
        assert ctx.previews and "`expand`" in ctx.prompt() and f"[{ctx.previews[0].n}] " in ctx.prompt()
        chunk = pai.expand(ctx.query_id, ctx.previews[0].n)
        assert chunk.n == ctx.previews[0].n and chunk.chunk_id == ctx.previews[0].chunk_id and chunk.text
        listed = {c.n for c in ctx.chunks} | {p.n for p in ctx.previews}
        not_listed = min(set(range(1, 13)) - listed)
        other = pai.context("how does a river delta form?")
        # another query's [n]: each query numbers its own candidates, so the same n reads this query's chunk
        theirs = other.previews[-1]
        mine = next(p for p in ctx.previews if p.n == theirs.n)
        assert theirs.chunk_id != mine.chunk_id and pai.expand(ctx.query_id, theirs.n).chunk_id == mine.chunk_id
        hostile = [
            ({"query_id": ctx.query_id, "n": not_listed}, 422),  # a candidate it never listed
            ({"query_id": 999_999, "n": 1}, 404),  # no such query
            ({"query_id": ctx.query_id, "n": 0}, 422),
            ({"query_id": ctx.query_id, "n": -3}, 422),
            ({"query_id": ctx.query_id, "n": 10**9}, 422),
            ({"query_id": ctx.query_id, "n": "3"}, 422),
            ({"query_id": ctx.query_id, "n": True}, 422),
            ({"query_id": ctx.query_id}, 422),
            ({"query_id": ctx.query_id, "n": 2, "extra": 1}, 422),
            ({"query_id": ctx.query_id, "n": ctx.previews[0].n, "scope": "bob/x"}, 404),  # named in another scope
            ({"query_id": ctx.query_id, "n": ctx.previews[0].n, "scope": "b\x00b"}, 422),
        ]
        for body, status in hostile:
            r = httpx.post(f"{srv.url}/expand", json=body, timeout=30)
            assert r.status_code == status, (body, r.text)
            assert "\n" not in r.json()["error"] and "honey" not in r.json()["error"], r.text
        with pytest.raises(ClientError, match="not one of its previews"):
            pai.expand(ctx.query_id, not_listed)
        for bad in (0, -1, 10**6, "2", 2.0, True, None):
            with pytest.raises(ClientError, match="n must be"):
                pai.expand(ctx.query_id, bad)
    got = labels(db_url, ctx.query_id)
    assert {r for r, v in got.items() if v[3]} == {ctx.previews[0].n, mine.n}


ALICE, BOB = "alice-" + "a" * 20, "bob-" + "b" * 20
TOKENS = f"""
- token: {ALICE}
  default: alice/notes
  write: ["alice/*"]
- token: {BOB}
  default: bob
  write: ["bob/*"]
"""


def test_another_scope_s_query_reads_as_unknown_beyond_loopback(first_stage_service, tmp_path, monkeypatch, db_url):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS)
    monkeypatch.setenv("PAI_TOKENS_FILE", str(tokens))
    for name in ("PAI_READ_TOKEN", "PAI_WRITE_TOKEN", "PAI_ADMIN_TOKEN", "PAI_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    with BackgroundServer(previewing(first_stage_service, host="0.0.0.0")) as srv:
        with Client(srv.url, token=ALICE) as alice:
            for name, text in TOPICS:
                alice.ingest(name, f"# {name.title()}\n\n{text}")
            ctx = alice.context("where do bees keep their honey?")
            n = ctx.previews[0].n
        with Client(srv.url) as anonymous:
            with pytest.raises(ClientError) as e:
                anonymous.expand(ctx.query_id, n)
            assert e.value.status == 401
        with Client(srv.url, token=BOB) as bob:
            for scope in (None, "alice/notes"):
                with pytest.raises(ClientError) as e:
                    bob.expand(ctx.query_id, n, scope=scope)
                assert e.value.status in (403, 404) and "honey" not in e.value.message
                assert e.value.message == f"unknown query id {ctx.query_id}" or "may not" in e.value.message
        with Client(srv.url, token=ALICE) as alice:
            assert alice.expand(ctx.query_id, n).text
    assert [r for r, v in labels(db_url, ctx.query_id).items() if v[3]] == [n]  # only alice's read was marked


def test_concurrent_expands_and_feedback_lose_nothing(notes, db_url, first_stage_service):
    service = previewing(first_stage_service)
    with in_process(service, max_size=8):
        bodies = [run_query(service, q, inline=True) for q in ("bees honey", "wasps nests", "mead from honey")]
    rng = random.Random(3)
    jobs = [(b["query_id"], v["rank"]) for b in bodies for v in b["previews"]]
    rng.shuffle(jobs)

    def read(job):
        with connect(db_url) as conn:
            return feedback.expand(conn, *job).rank

    with ThreadPoolExecutor(6) as pool:
        assert sorted(pool.map(read, jobs + jobs)) == sorted(r for _, r in jobs + jobs)
    for b in bodies:
        got = labels(db_url, b["query_id"])
        assert {r for r, v in got.items() if v[3]} == {v["rank"] for v in b["previews"]}


def test_an_assistant_reads_a_preview_over_mcp(notes, db_url, first_stage_service, tmp_path):
    """The SDK's own client: `context` lists the previews (text and structured), `expand` reads one, `feedback`
    citing it labels it used; hostile `expand` arguments are one-line tool errors."""
    import anyio
    import mcp

    from serving.mcp_server import build_mcp

    def text_of(result) -> str:
        return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")

    async def steps(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "expand" in tools and "preview" in tools["context"].description
        assert tools["expand"].input_schema["properties"]["n"]["minimum"] == 1
        r = await session.call_tool("context", {"query": "where do bees keep their honey?"})
        qid, previews = r.structured_content["query_id"], r.structured_content["previews"]
        assert previews and all(f"[{p['n']}] {p['line']}" in text_of(r) for p in previews)
        n = previews[0]["n"]
        read = await session.call_tool("expand", {"query_id": qid, "n": n})
        assert not read.is_error and read.structured_content["n"] == n and text_of(read).startswith(f"[{n}] ")
        r = await session.call_tool("feedback", {"query_id": qid, "answer": f"Honey is kept as read in [{n}]."})
        assert not r.is_error and r.structured_content["used_ranks"] == [n], text_of(r)
        errors = []
        for args in (
            {"query_id": qid, "n": 0},
            {"query_id": qid, "n": "1"},
            {"query_id": qid, "n": 10**7},
            {"query_id": 10**12, "n": 1},
            {"query_id": qid},
            {"query_id": qid, "n": 1, "k": 2},
        ):
            r = await session.call_tool("expand", args)
            assert r.is_error, (args, text_of(r))
            errors.append(text_of(r))
        assert all(e and "\n" not in e and "Traceback" not in e for e in errors), errors
        return qid, n

    async def run(url):
        with Client(url) as client:
            async with mcp.Client(build_mcp(client, tmp_path / "staging")) as session:
                return await steps(session)

    with BackgroundServer(previewing(first_stage_service)) as srv:
        qid, n = anyio.run(run, srv.url)
    got = labels(db_url, qid)
    assert got[n][3:] == (True, True)  # read whole, and cited
