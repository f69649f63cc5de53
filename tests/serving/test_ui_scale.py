"""The web page on a store of 10,000 chunks: every page renders in under 200 ms at the median (over real HTTP,
the server in this process), and the memory pages beyond the first. Prints the figures docs/measurements.md
gives (`pytest -m slow tests/serving/test_ui_scale.py -s`)."""

import re
import statistics
import time

import httpx
import pytest

from serving.server import BackgroundServer

CHUNKS, PER_DOC, RUNS = 10_000, 5, 15
WORDS = [
    "honey",
    "wax",
    "comb",
    "nest",
    "larder",
    "fungus",
    "leaf",
    "hive",
    "queen",
    "drone",
    "worker",
    "nectar",
    "pollen",
    "colony",
    "swarm",
]


def fill(conn) -> None:
    """2,000 notes of 5 chunks each, random unit vectors (the page never embeds them), words to find."""
    conn.execute(
        """INSERT INTO documents (source, path, content_hash, n_chunks, written_at)
           SELECT 'webhook:note-' || g, 'webhook:', md5(g::text), %s, now() - g * interval '1 minute'
           FROM generate_series(1, %s) g""",
        (PER_DOC, CHUNKS // PER_DOC),
    )
    conn.execute(
        """INSERT INTO chunks (document_id, source, ord, heading, start_line, end_line, text, content_hash, tokens,
                               embedding)
           SELECT d.id, d.source, o, 'part ' || o, o * 3 + 1, o * 3 + 3,
                  'Note ' || d.id || ' part ' || o || ': ' || (%s::text[])[1 + (d.id * 7 + o) %% 15] || ' and '
                      || (%s::text[])[1 + (d.id + o * 3) %% 15] || repeat(' filler words of a plain note', 8),
                  md5(d.id || '-' || o), 60,
                  (SELECT l2_normalize(array_agg(random() - 0.5)::vector)::halfvec
                   FROM generate_series(1, 384 + 0 * d.id + 0 * o))
           FROM documents d, generate_series(0, %s) o""",
        (WORDS, WORDS, PER_DOC - 1),
    )
    conn.execute("ANALYZE")


def p50_ms(client: httpx.Client, path: str) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, (path, r.status_code)
    return statistics.median(times)


@pytest.mark.slow
def test_pages_render_under_200ms_on_10k_chunks(first_stage_service, conn, db_url, monkeypatch):
    for name in ("PAI_TOKENS_FILE", "PAI_READ_TOKEN", "PAI_WRITE_TOKEN", "PAI_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    t0 = time.perf_counter()
    fill(conn)
    (n,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    assert n == CHUNKS
    print(f"\nfilled {n} chunks in {time.perf_counter() - t0:.1f} s")
    with BackgroundServer(first_stage_service()) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/ui/ask").text).group(1)
        for i in range(20):
            r = client.post("/ui/ask", data={"csrf": csrf, "query": f"{WORDS[i % 15]} in the {WORDS[(i + 4) % 15]}"})
            assert r.status_code == 303
        qid = r.headers["location"].rsplit("/", 1)[1]
        query = client.get(f"/ui/queries/{qid}").text
        chunk = re.search(r"/ui/chunks/(\d+)", query).group(1)
        doc = conn.execute("SELECT document_id FROM chunks WHERE id = %s", (int(chunk),)).fetchone()[0]
        memory = client.get("/ui/memory").text
        assert "page 1 of 40" in memory and 'rel="next"' in memory  # paginated beyond the first 50
        assert "page 40 of 40" in client.get("/ui/memory?page_no=40").text
        pages = {
            "ask": "/ui/ask",
            "query": f"/ui/queries/{qid}",
            "memory": "/ui/memory",
            "memory, page 30": "/ui/memory?page_no=30",
            "memory, words": "/ui/memory?q=larder+fungus",
            "memory, kind note": "/ui/memory?kind=note&page_no=2",
            "document": f"/ui/documents/{doc}",
            "chunk": f"/ui/chunks/{chunk}",
            "loop": "/ui/loop",
            "health": "/ui/health",
        }
        figures = {name: p50_ms(client, path) for name, path in pages.items()}
    print(f"p50 over {RUNS} GETs each, {CHUNKS:,} chunks:")
    for name, ms in figures.items():
        print(f"  {name:20s} {ms:7.1f} ms")
    slow = {k: round(v) for k, v in figures.items() if v >= 200}
    assert not slow, f"pages at or over 200 ms p50: {slow}"
