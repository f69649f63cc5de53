"""Property/fuzz suite: arbitrary bytes, unicode (NUL, lone surrogates, RTL marks), sizes at and over
every limit, wrong types and concurrent writers against /query, /feedback, /ingest (real HTTP, real
embedded Postgres, real model) and `pai ingest`. Never a 5xx or a traceback; afterwards every
document's n_chunks equals its chunk rows and its full-text rows, and each query holds one
feedback state."""

import json
import threading

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app as cli
from retrieval.params import IngestParams
from serving.server import BackgroundServer

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
HOSTILE = [
    "\x00",
    "\ud800",
    "\udfff",
    "\u202e",
    "\u200f",
    "\ufeff",
    "\u0301",
    "𝔘",
    "\r\n",
    "[REDACTED:X]",
    "'; DROP TABLE chunks; --",
]
chars = st.characters(exclude_categories=())  # surrogates included
text = st.one_of(
    st.text(chars, max_size=60),
    st.lists(st.sampled_from(HOSTILE) | st.text(chars, max_size=8), max_size=8).map("".join),
    st.sampled_from([" " * 3, "x" * 3999, "x" * 4000, "x" * 4001, "y " * 5_000]),
)
anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    text,
    st.lists(st.integers(-3, 10**6), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@pytest.fixture
def client(first_stage_service):
    service = first_stage_service(ingest=IngestParams(chunk_tokens=1000))
    with BackgroundServer(service) as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
        for name in ("bees", "rivers"):
            assert (
                c.post("/ingest", json={"source": name, "text": f"# {name}\n\nA note about {name}."}).status_code == 200
            )
        yield c


def post(client, path, body) -> httpx.Response:
    """JSON as a client would send it; lone surrogates go as \\ud800 escapes (ensure_ascii)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = client.post(path, content=content, headers={"content-type": "application/json"})
    assert r.status_code < 500, (path, body if len(repr(body)) < 500 else repr(body)[:500], r.status_code, r.text[:500])
    if r.status_code >= 400:
        err = r.json()["error"]
        assert isinstance(err, str) and "\n" not in err and "Traceback" not in err
    return r


def check_db(conn, invariant_breaks):
    assert invariant_breaks(conn) == []
    # one feedback state per query: a question's quality is the number of its queries rated +1, never more
    over = conn.execute(
        """SELECT l.question, l.quality_score, (SELECT count(*) FROM queries q WHERE q.text = l.question AND q.rating = 1)
           FROM learned_qa l"""
    ).fetchall()
    assert all(score <= max(ups, 1) for _, score, ups in over), over


def test_query_never_5xx(client, conn, invariant_breaks):
    @FUZZ
    @given(
        st.one_of(
            st.fixed_dictionaries({"query": anything}, optional={"inline": anything}), anything, st.binary(max_size=300)
        )
    )
    def run(body):
        post(client, "/query", body)

    run()
    check_db(conn, invariant_breaks)


def test_feedback_never_5xx_and_stays_one_state(client, conn, invariant_breaks):
    qids = [client.post("/query", json={"query": q}).json()["query_id"] for q in ("bees", "rivers")]
    chunk_ids = [c for (c,) in conn.execute("SELECT id FROM chunks")]
    good_id = st.sampled_from(qids)
    body = st.fixed_dictionaries(
        {"query_id": good_id | anything},
        optional={
            "used_chunk_ids": st.lists(st.sampled_from(chunk_ids), max_size=2) | anything,
            "answer": text | anything,
            "rating": st.sampled_from([1, -1]) | anything,
            "correction": text | anything,
        },
    )

    @FUZZ
    @given(body | st.binary(max_size=200))
    def run(b):
        post(client, "/feedback", b)

    run()
    check_db(conn, invariant_breaks)


def test_ingest_never_5xx_and_keeps_the_invariants(client, conn, invariant_breaks):
    body = st.fixed_dictionaries(
        {"source": st.sampled_from(["a", "b", "c"]) | text | anything, "text": text | anything},
        optional={"title": text | anything, "kind": st.sampled_from(["markdown", "text", "code"]) | anything},
    )

    valid = st.fixed_dictionaries({"source": st.sampled_from(["a", "b", "c"]), "text": text}, optional={"title": text})

    @FUZZ
    @given(valid | body | st.binary(max_size=200))
    def run(b):
        post(client, "/ingest", b)

    run()
    check_db(conn, invariant_breaks)


def test_concurrent_writers(client, conn, invariant_breaks):
    """Ingest of the same sources and feedback on the same queries from 6 threads at once."""
    qids = [client.post("/query", json={"query": "bees"}).json()["query_id"] for _ in range(2)]
    errors = []

    def writer(i):
        try:
            for j in range(6):
                for source in ("shared-1", "shared-2"):
                    text = (
                        f"# Shared\n\nVersion {j % 3} of a shared note, written by many.\n\nSecond paragraph {j % 2}."
                    )
                    post(client, "/ingest", {"source": source, "text": text})
                post(
                    client,
                    "/feedback",
                    {"query_id": qids[j % 2], "rating": 1 if (i + j) % 3 else -1, "answer": "bees [1]"},
                )
        except AssertionError as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check_db(conn, invariant_breaks)
    ups = conn.execute("SELECT count(*) FROM queries WHERE text = 'bees' AND rating = 1").fetchone()[0]
    score = conn.execute("SELECT coalesce(max(quality_score), 0) FROM learned_qa WHERE question = 'bees'").fetchone()[0]
    assert score <= max(ups, 1)


file_bytes = st.one_of(
    st.binary(max_size=400),
    text.map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.lists(
        st.sampled_from(
            [
                b"# T\n\n",
                b"plain words ",
                b"\x00",
                b"\xff\xfe",
                b"\n",
                b"x" * 9000,
                b'{"_id": 1, "text": "t"}\n',
                b'{"_id": "\\u0000", "text": "\\ud800"}\n',
                b"password = hunter22\n",
            ]
        ),
        max_size=8,
    ).map(b"".join),
)


def test_pai_ingest_never_tracebacks(db_url, tmp_path, monkeypatch, conn, invariant_breaks):
    monkeypatch.setenv("DATABASE_URL", db_url)
    runner = CliRunner()
    n = iter(range(10**6))

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(st.tuples(st.sampled_from([".md", ".txt", ".jsonl", ".py"]), file_bytes), min_size=1, max_size=3))
    def run(files):
        d = tmp_path / f"in{next(n)}"
        d.mkdir()
        for i, (suffix, data) in enumerate(files):
            (d / f"f{i}{suffix}").write_bytes(data)
        r = runner.invoke(cli, ["ingest", str(d), "--json"])
        assert r.exit_code in (0, 2), r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert "Traceback" not in r.output

    run()
    check_db(conn, invariant_breaks)
