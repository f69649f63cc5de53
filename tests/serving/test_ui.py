"""The web page (/ui) over real HTTP against the real app and the real embedded Postgres: the whole flow on
loopback (add notes, ask, see the candidates, answer citing [n], see the citation on the chunk's history, rate,
edit as a newer version, forget), the CSRF check on every write, the login beyond loopback, scoped tokens held to
their scopes, and hostile content rendered as text."""

import html
import re

import httpx
import pytest

from serving.server import BackgroundServer

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
TOKENS_ENV = ("PAI_TOKENS_FILE", "PAI_READ_TOKEN", "PAI_WRITE_TOKEN", "PAI_ADMIN_TOKEN")
BEES = "# Bees\n\nHoney bees store nectar as honey in wax combs inside the hive."
ANTS = "# Ants\n\nLeafcutter ants farm a fungus on the leaves they carry home."


@pytest.fixture(autouse=True)
def no_tokens(monkeypatch):
    for name in TOKENS_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def serve(first_stage_service):
    return lambda host="127.0.0.1": BackgroundServer(first_stage_service(host=host))


def csrf_of(client: httpx.Client, path: str = "/ui/ask") -> str:
    r = client.get(path)
    assert r.status_code == 200, r.text
    return CSRF.search(r.text).group(1)


def post(client: httpx.Client, path: str, csrf: str, **fields) -> httpx.Response:
    return client.post(path, data={"csrf": csrf, **fields})


def add_note(client, csrf, source, text, scope=None) -> int:
    r = post(client, "/ui/memory/notes", csrf, source=source, text=text, **({"scope": scope} if scope else {}))
    assert r.status_code == 303, r.text
    return int(r.headers["location"].rsplit("/", 1)[1])


def ask(client, csrf, query, **kw) -> int:
    r = post(client, "/ui/ask", csrf, query=query, **kw)
    assert r.status_code == 303, r.text
    return int(r.headers["location"].rsplit("/", 1)[1])


def test_the_flow_on_loopback(serve, db_url):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        csrf = csrf_of(client)
        bees = add_note(client, csrf, "bees", BEES)
        add_note(client, csrf, "ants", ANTS)
        qid = ask(client, csrf, "where do bees keep honey")
        page = client.get(f"/ui/queries/{qid}").text
        assert "where do bees keep honey" in page and "webhook:bees" in page and "webhook:ants" in page
        assert 'id="selector">first-stage' in page and "in context" in page
        staging = client.get(f"/ui/queries/{qid}/staging")
        assert staging.status_code == 200 and "# Query: where do bees keep honey" in staging.text
        # which rank is the bees note, and which chunk
        rank = int(re.search(r'<tr id="cand-(\d+)">(?:(?!</tr>).)*webhook:bees', page, re.S).group(1))
        chunk = int(re.search(rf'<tr id="cand-{rank}">.*?/ui/chunks/(\d+)', page, re.S).group(1))
        r = post(client, f"/ui/queries/{qid}/answer", csrf, answer=f"In wax combs [{rank}].")
        assert r.status_code == 303
        page = client.get(f"/ui/queries/{qid}").text
        assert f"Cited: [{rank}]" in page and 'class="cited">cited' in page
        history = client.get(f"/ui/chunks/{chunk}").text
        assert "where do bees keep honey" in history and "<td>cited</td>" in history
        # a person's -1 on the ants candidate: a label the loop reads
        ants_chunk = int(re.search(r"/ui/chunks/(\d+)\"><bdi>webhook:ants", page).group(1))
        assert post(client, f"/ui/queries/{qid}/rate", csrf, chunk_id=str(ants_chunk), useful="0").status_code == 303
        assert "−1 on" in client.get(f"/ui/chunks/{ants_chunk}").text
        # a correction: a newer version served, the old one kept, superseded, both dated
        doc = client.get(f"/ui/documents/{bees}").text
        written_before = re.search(r'id="written">([^<]+)<', doc).group(1)
        fixed = "# Bees\n\nHoney bees store nectar as honey in wax combs; they cap each cell with wax when it is ripe."
        assert post(client, f"/ui/documents/{bees}/edit", csrf, text=fixed).status_code == 303
        doc = client.get(f"/ui/documents/{bees}").text
        assert "served now" in doc and "superseded" in doc and "corrected in the web page" in doc
        assert re.search(r'id="written">([^<]+)<', doc).group(1) >= written_before
        qid2 = ask(client, csrf, "how do bees cap honey cells")
        page2 = client.get(f"/ui/queries/{qid2}").text
        assert "cap each cell with wax" in page2
        # forget: nowhere after
        r = post(client, f"/ui/documents/{bees}/forget", csrf)
        assert r.status_code == 303 and "forgotten" in r.headers["location"]
        assert client.get(f"/ui/documents/{bees}").status_code == 404
        assert client.get(f"/ui/chunks/{chunk}").status_code == 404
        assert "webhook:bees" not in client.get("/ui/memory").text
        assert "webhook:bees" not in client.get("/ui/memory?q=honey").text
        for q in (qid, qid2):
            old = client.get(f"/ui/queries/{q}").text
            assert "wax combs inside" not in old and "cap each cell" not in old and "forgotten or changed" in old
        qid3 = ask(client, csrf, "where do bees keep honey")
        assert "webhook:bees" not in client.get(f"/ui/queries/{qid3}").text
        assert "Nothing redacted" in client.get("/ui/health").text


def test_every_write_needs_the_csrf_token(serve, db_url):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        csrf = csrf_of(client)
        doc = add_note(client, csrf, "bees", BEES)
        writes = [
            ("/ui/memory/notes", {"source": "x", "text": "planted"}),
            ("/ui/ask", {"query": "bees"}),
            (f"/ui/documents/{doc}/edit", {"text": "planted"}),
            (f"/ui/documents/{doc}/forget", {}),
            ("/ui/logout", {}),
        ]
        for path, fields in writes:
            for token in (None, "", "wrong", csrf + "x"):
                data = fields | ({} if token is None else {"csrf": token})
                r = client.post(path, data=data)
                assert r.status_code == 403 and "CSRF" in r.text, (path, token)
        # another browser (no cookie of this session) with this session's token: refused too
        with httpx.Client(base_url=srv.url, timeout=60) as other:
            assert other.post(f"/ui/documents/{doc}/forget", data={"csrf": csrf}).status_code == 403
        assert "planted" not in client.get(f"/ui/documents/{doc}").text
        assert "webhook:x" not in client.get("/ui/memory").text
        assert client.get(f"/ui/documents/{doc}").status_code == 200


def test_beyond_loopback_every_page_needs_a_login(serve, monkeypatch, db_url):
    monkeypatch.setenv("PAI_READ_TOKEN", "r" * 20)
    monkeypatch.setenv("PAI_WRITE_TOKEN", "w" * 20)
    with serve(host="0.0.0.0") as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        for path in ("/ui/ask", "/ui/memory", "/ui/loop", "/ui/health", "/ui/documents/1", "/ui/chunks/1"):
            r = client.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/ui/login"), path
        csrf = csrf_of(client, "/ui/login")
        for wrong in ("", "nope", "r" * 19, "r" * 20 + " ", "rrrr\u0440" * 4):
            r = post(client, "/ui/login", csrf, token=wrong)
            assert r.status_code == 401 and "wrong token" in r.text
        planted = client.cookies.get("pai_ui")
        r = post(client, "/ui/login", csrf, token="r" * 20, next="/ui/memory")
        assert r.status_code == 303 and r.headers["location"] == "/ui/memory"
        assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=strict" in r.headers["set-cookie"]
        assert client.cookies.get("pai_ui") != planted  # a new session on login
        assert client.get("/ui/memory").status_code == 200
        csrf = csrf_of(client)
        r = post(client, "/ui/memory/notes", csrf, source="bees", text=BEES)  # the read token may not write
        assert r.status_code == 403
        with httpx.Client(base_url=srv.url, timeout=60, cookies={"pai_ui": planted}) as thief:
            assert thief.get("/ui/memory").status_code == 303  # the pre-login session id is worth nothing
        monkeypatch.delenv("PAI_READ_TOKEN")  # the token revoked: its sessions are logged out
        assert client.get("/ui/memory").status_code == 303
        with httpx.Client(base_url=srv.url, timeout=60) as writer:
            post(writer, "/ui/login", csrf_of(writer, "/ui/login"), token="w" * 20)
            assert add_note(writer, csrf_of(writer), "bees", BEES)
            assert post(writer, "/ui/logout", csrf_of(writer)).status_code == 303
            assert writer.get("/ui/memory").status_code == 303
        # the API is still behind its bearer token
        assert client.post("/query", json={"query": "bees"}).status_code == 401


TOKENS = """
- token: alice-aaaaaaaaaaaaaaaaaaaa
  default: alice
  read: ["alice"]
  write: ["alice"]
- token: bob-bbbbbbbbbbbbbbbbbbbbbbbb
  default: bob
  read: ["bob"]
  write: ["bob"]
- token: reader-rrrrrrrrrrrrrrrrrrrr
  default: bob
  read: ["bob"]
"""


def test_a_scoped_token_sees_only_its_scopes(serve, monkeypatch, tmp_path, db_url):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS)
    monkeypatch.setenv("PAI_TOKENS_FILE", str(tokens))

    def login(client, token):
        r = post(client, "/ui/login", csrf_of(client, "/ui/login"), token=token)
        assert r.status_code == 303
        return csrf_of(client)

    with (
        serve(host="0.0.0.0") as srv,
        httpx.Client(base_url=srv.url, timeout=60) as alice,
        httpx.Client(base_url=srv.url, timeout=60) as bob,
        httpx.Client(base_url=srv.url, timeout=60) as reader,
    ):
        a, b = login(alice, "alice-" + "a" * 20), login(bob, "bob-" + "b" * 24)
        a_doc = add_note(alice, a, "kiwi-alice", "# Kiwi\n\nAlice waters the kiwi orchard every Tuesday.")
        b_doc = add_note(bob, b, "kiwi-bob", "# Kiwi\n\nBob's kiwi budget is forty euros.")
        assert post(alice, "/ui/memory/notes", a, source="x", text="into bob", scope="bob").status_code == 403
        b_q = ask(bob, b, "kiwi")
        a_q = ask(alice, a, "kiwi")
        assert "kiwi-bob" not in alice.get(f"/ui/queries/{a_q}").text
        memory = alice.get("/ui/memory").text
        assert "kiwi-alice" in memory and "kiwi-bob" not in memory
        assert "kiwi-bob" not in alice.get("/ui/memory?q=budget").text
        for path in (f"/ui/documents/{b_doc}", f"/ui/queries/{b_q}", f"/ui/queries/{b_q}/staging"):
            assert alice.get(path).status_code == 404, path
        assert "forty euros" not in alice.get("/ui/ask").text and "kiwi-bob" not in alice.get("/ui/health").text
        for path, fields in (
            (f"/ui/documents/{b_doc}/edit", {"text": "planted"}),
            (f"/ui/documents/{b_doc}/forget", {}),
            (f"/ui/queries/{b_q}/answer", {"answer": "planted [1]"}),
            (f"/ui/queries/{b_q}/rate", {"chunk_id": "1", "useful": "1"}),
        ):
            assert post(alice, path, a, **fields).status_code == 404, path
        assert "forty euros" in bob.get(f"/ui/documents/{b_doc}").text
        assert "planted" not in bob.get(f"/ui/queries/{b_q}").text
        r = login(reader, "reader-" + "r" * 20)
        assert "kiwi-bob" in reader.get("/ui/memory").text  # reads bob
        assert post(reader, f"/ui/documents/{b_doc}/forget", r).status_code == 404  # and may not write it
        assert post(reader, f"/ui/queries/{b_q}/answer", r, answer="x [1]").status_code == 404
        assert bob.get(f"/ui/documents/{b_doc}").status_code == 200
        assert alice.get(f"/ui/documents/{a_doc}").status_code == 200


HOSTILE_TITLE = "<script>alert('t')</script><img src=x onerror=alert(1)>\u202eevil\u202c"
HOSTILE_TEXT = (
    "# <script>alert('h')</script>\n\n<b>bold</b> <a href=\"javascript:alert(1)\">x</a> \u200fמימין\u200e "
    + "</pre></bdi></table><script>alert(2)</script>\n\n"
    + "y" * 1_000_000
)


def test_hostile_content_renders_as_text(serve, db_url):
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=120) as client:
        csrf = csrf_of(client)
        doc = add_note(client, csrf, HOSTILE_TITLE, HOSTILE_TEXT)
        api = {"source": "titled", "title": HOSTILE_TITLE, "text": "<i>x</i> \u202e" + "z" * 1_000_000}
        assert client.post("/ingest", json=api).status_code == 200  # a title from the API: the chunks' heading
        titled = re.search(r'/ui/documents/(\d+)"><bdi>webhook:titled', client.get("/ui/memory").text).group(1)
        qid = ask(client, csrf, "<script>alert('q')</script> bold \u202e")
        post(client, f"/ui/queries/{qid}/answer", csrf, answer="<script>alert('a')</script> [1]")
        chunk = int(re.search(r"/ui/chunks/(\d+)", client.get(f"/ui/documents/{doc}").text).group(1))
        titled_chunk = re.search(r"/ui/chunks/(\d+)", client.get(f"/ui/documents/{titled}").text).group(1)
        pages = ["/ui/memory", f"/ui/documents/{doc}", f"/ui/queries/{qid}", f"/ui/chunks/{chunk}", "/ui/ask"]
        for path in pages + [f"/ui/documents/{titled}", f"/ui/chunks/{titled_chunk}", "/ui/health"]:
            r = client.get(path)
            assert r.status_code == 200, path
            assert "default-src 'none'" in r.headers["content-security-policy"]
            body = r.text
            assert "<script" not in body.lower() and "<img" not in body and "<b>bold" not in body, path
            assert "javascript:alert" not in body or "&#34;javascript:alert(1)&#34;" in body, path
            assert "&lt;script&gt;" in body or path == "/ui/health", path
            assert len(body) < 200_000, path  # the 1 MB line is cut on the page
        assert "\u202eevil" in html.unescape(client.get("/ui/memory").text)  # kept as text, isolated by <bdi>
        # NUL: refused with one line, nothing stored
        r = post(client, "/ui/memory/notes", csrf, source="nul", text="a\x00b")
        assert r.status_code == 422 and "NUL" in r.text
        r = post(client, f"/ui/documents/{doc}/edit", csrf, text="a\x00b")
        assert r.status_code == 422 and "NUL" in r.text
        assert "webhook:nul" not in client.get("/ui/memory").text
        # not a form, not UTF-8, too many fields, an id that is not one
        assert client.post("/ui/ask", content=b"\xff\xfe", headers={"content-type": "x"}).status_code == 400
        many = "&".join(f"f{i}=1" for i in range(50))
        assert client.post("/ui/ask", content=many.encode()).status_code == 400
        assert client.get("/ui/documents/99999999999999999999").status_code in (404, 422)
        assert client.get("/ui/memory?page_no=-1&since=notadate&kind=<x>").status_code == 200
        assert post(client, "/ui/documents/abc/forget", csrf).status_code == 404


def test_the_loop_page(serve, conn, embedder, monkeypatch, tmp_path, db_url):
    """The deployments (champion first), Recall@5 beside the baseline as a plot, the running trial's wins and
    losses over its cited queries; a scoped login sees the versions but not the trial (it spans every scope)."""
    from retrieval.contracts.interleaving import TrialParams
    from retrieval.corpus.ingest import ingest_documents
    from retrieval.corpus.sources import Document
    from retrieval.logs import deployments, feedback, trials
    from retrieval.params import IngestParams, SearchParams
    from retrieval.query.search import search

    old = {"version": "pai-selector:1", "kind": "ranker", "recall@5": 0.61, "hybrid_recall@5": 0.58}
    new = {"version": "pai-selector:2", "kind": "ranker", "recall@5": 0.66, "hybrid_recall@5": 0.58}
    deployments.announce(conn, old, "promote", "passed the gate")
    deployments.announce(conn, new, "promote", "won a trial")
    trial = trials.start(conn, new, {"version": "pai-selector:3", "kind": "ranker"}, TrialParams())
    docs = [
        Document(f"webhook:n{i}", "webhook:", f"# N{i}\n\nBees note number {i} about honey.", "markdown")
        for i in range(3)
    ]
    ingest_documents(conn, docs, IngestParams(), SearchParams(threshold=0.0), embedder)
    cands = search(conn, embedder, "bees honey", SearchParams(threshold=0.0)).candidates
    for used_rank in (1, 1, 2):  # two wins for the challenger (rank 1), one loss
        qid = feedback.log_query(
            conn, "bees honey", cands, "pai-selector:2", [1, 2], shown=[1, 2], trial_id=trial.id,
            teams={1: "challenger", 2: "champion"},
        )  # fmt: skip
        feedback.record_feedback(conn, qid, used_chunk_ids=[cands[used_rank - 1].chunk_id])
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS)
    monkeypatch.setenv("PAI_TOKENS_FILE", str(tokens))
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        page = client.get("/ui/loop").text
        assert page.index("pai-selector:2 (champion)") < page.index("pai-selector:1<")
        assert "pai-selector:3" in page and "2 · 1 · 0" in page  # wins · losses · ties
        assert "wins: 2" in page and "losses: 1" in page and "<polyline" in page
        assert "recall@5: 0.66" in page and "hybrid_recall@5: 0.58" in page
        client.headers["authorization"] = "Bearer alice-" + "a" * 20
        scoped = client.get("/ui/loop").text
        assert "pai-selector:2" in scoped and "an admin sees them" in scoped and "2 · 1 · 0" not in scoped


def test_health_counts_redactions_never_secrets(serve, db_url):
    secret = "ghp_" + "x7Kq2" * 7 + "a"
    with serve() as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        csrf = csrf_of(client)
        doc = add_note(client, csrf, "deploy", f"# Deploy\n\nThe deploy token is {secret} for the CI runner.")
        assert post(client, "/ui/memory/notes", csrf, source="bad", text="x\x00").status_code == 422
        health = client.get("/ui/health").text
        rows = re.findall(r"<tr><td>([A-Z0-9_]+)</td><td>(\d+)</td><td>(\d+)</td>", health)
        assert rows and all(int(stored) >= 1 and int(ingested) >= 1 for _, stored, ingested in rows), health
        assert "<td>ui</td>" in health and "<td>default</td><td>1</td>" in health
        for path in ("/ui/health", f"/ui/documents/{doc}", "/ui/memory"):
            assert secret not in client.get(path).text


def test_a_flood_of_anonymous_visits_never_logs_a_person_out(monkeypatch):
    from serving.ui import session

    monkeypatch.setattr(session, "MAX_SESSIONS", 50)
    sessions = session.Sessions()
    sid, _ = sessions.new("a-token-of-twenty-chars")
    anonymous = [sessions.new()[0] for _ in range(500)]
    assert sessions.get(sid).token == "a-token-of-twenty-chars"
    assert sessions.get(anonymous[0]) is None and sessions.get(anonymous[-1]) is not None
    assert sessions.get(None) is None and sessions.get("") is None and sessions.get("\x00" * 9999) is None
    sessions.end(sid)
    assert sessions.get(sid) is None
