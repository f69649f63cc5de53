"""The replay: literal feedback building, and a small real run through the service."""

import json
import random
from pathlib import Path

from typer.testing import CliRunner

from cli.lab.replay import ReplayQuery, feedback_for, load_queries, replay
from cli.main import app
from eval.consumer import ReplayParams
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]


RESPONSE = {
    "query_id": 7,
    "candidates": [
        {"rank": 1, "chunk_id": 1, "source": "/c.jsonl#A"},
        {"rank": 2, "chunk_id": 2, "source": "/c.jsonl#B"},
        {"rank": 3, "chunk_id": 3, "source": "/c.jsonl#A"},
    ],
    "context": [
        {"rank": 2, "chunk_id": 2, "source": "/c.jsonl#B", "text": "Bees dance. Wasps sting people often."},
        {"rank": 3, "chunk_id": 3, "source": "/c.jsonl#A", "text": "Mice sleep. Aspirin lowers fever in adults [4]."},
    ],
}


def test_the_oracle_judges_every_candidate():
    oracle = ReplayParams(consumer="oracle")
    assert feedback_for(RESPONSE, ReplayQuery("q", "x", frozenset({"A"})), oracle) == {
        "query_id": 7,
        "used_chunk_ids": [1, 3],
        "ignored_chunk_ids": [2],
        "rating": 1,
    }
    assert feedback_for(RESPONSE, ReplayQuery("q", "x", frozenset({"C"}), "yes"), oracle) == {
        "query_id": 7,
        "used_chunk_ids": [],
        "ignored_chunk_ids": [1, 2, 3],
        "rating": -1,
        "answer": "yes",
    }


def test_the_realistic_consumer_cites_within_its_context_only():
    exact = ReplayParams(consumer="realistic", miss_rate=0.0, false_cite_rate=0.0)
    fb = feedback_for(RESPONSE, ReplayQuery("q", "aspirin fever", frozenset({"A"}), "Yes"), exact)
    # chunk 1 is relevant but was never shown; the citation closes the sentence of chunk 3 that answers, quoted
    # without the chunk's own bracketed number (it would read as a citation of candidate 4)
    assert fb == {"query_id": 7, "answer": "Yes. Aspirin lowers fever in adults [3].", "rating": 1}
    fb = feedback_for(RESPONSE, ReplayQuery("q", "x", frozenset({"Z"})), exact)
    assert fb["rating"] == -1 and "[" not in fb["answer"]
    noisy = ReplayParams(consumer="realistic", miss_rate=0.5, false_cite_rate=0.5)
    rng = random.Random(0)
    answers = [
        feedback_for(RESPONSE, ReplayQuery("q", "x", frozenset({"A"})), noisy, rng)["answer"] for _ in range(200)
    ]
    assert {"[2]" in a for a in answers} == {True, False} and {"[3]" in a for a in answers} == {True, False}
    assert not any("[1]" in a for a in answers)
    # a false cite quotes the chunk (it used one that did not answer) or puts [n] on the claim (misattribution)
    fc = ReplayParams(consumer="realistic", miss_rate=1.0, false_cite_rate=1.0, false_cite_grounded=0.5, miss_quoted=0)
    q = ReplayQuery("q", "wasps lower fever", frozenset({"A"}))
    answers = {feedback_for(RESPONSE, q, fc, rng)["answer"] for _ in range(50)}
    assert answers == {"Wasps sting people often [2].", "wasps lower fever [2]."}
    # a miss says nothing of the relevant chunk, or quotes it without its [n]
    miss = ReplayParams(consumer="realistic", miss_rate=1.0, false_cite_rate=0.0, miss_quoted=0.5)
    answers = {
        feedback_for(RESPONSE, ReplayQuery("q", "aspirin", frozenset({"A"})), miss, rng)["answer"] for _ in range(50)
    }
    assert answers == {"Aspirin lowers fever in adults.", "From the notes; the context did not say."}
    assert ReplayParams(false_cite_grounded=-0.1).problems() != [] and ReplayParams(miss_quoted=2).problems() != []
    assert ReplayParams(consumer="psychic", miss_rate=2).problems() != [] and len(ReplayParams().problems()) == 0


def test_load_queries_counts(benchmark_dir):
    assert len(load_queries(benchmark_dir, "scifact", "train")) == 809
    hp = load_queries(benchmark_dir, "hotpotqa", "train")
    assert len(hp) == 300 and all(len(q.relevant) == 2 for q in hp)


def test_simulate_fills_the_feedback_log(db_url, benchmark_dir, monkeypatch, tmp_path, conn):
    """The oracle consumer (the bound) judges every candidate; the main job's realistic one is tested below."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / ".pai"))
    params = tmp_path / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text().replace("consumer: realistic ", "consumer: oracle "))
    r = CliRunner().invoke(
        app,
        [
            "lab",
            "simulate",
            "--dataset",
            "scifact",
            "--split",
            "train",
            "--max-queries",
            "8",
            "--corpus-limit",
            "40",
            "--benchmark-dir",
            str(benchmark_dir),
            "--params",
            str(params),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["queries"] == 8 and summary["errors"] == 0 and summary["with_used"] >= 6
    rows = conn.execute(
        "SELECT count(DISTINCT q.id), count(*), count(c.used), count(*) FILTER (WHERE c.used)"
        " FROM queries q JOIN query_candidates c ON c.query_id = q.id"
    ).fetchone()
    assert rows[0] == 8 and rows[1] == rows[2]  # every candidate of every query is labelled used or ignored
    assert rows[3] == summary["used"]
    assert len(list((tmp_path / ".pai" / "staging").rglob("*.md"))) == 8


def test_a_realistic_replay_never_labels_outside_the_context(db_url, benchmark_dir, monkeypatch, tmp_path, conn):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "params.yaml"
    # no exploration here: the literal propensities below are those of a policy that never explores
    raw = (REPO / "params.yaml").read_text().replace("consumer: oracle", "consumer: realistic")
    params.write_text(raw.replace("explore_rate: 0.05 ", "explore_rate: 0.0 "))
    r = CliRunner().invoke(
        app,
        ["lab", "simulate", "--dataset", "scifact", "--split", "train", "--max-queries", "10", "--corpus-limit", "60"]
        + ["--benchmark-dir", str(benchmark_dir), "--params", str(params), "--json"],
    )
    assert r.exit_code == 0, r.output
    got = conn.execute(
        "SELECT c.shown, c.used, c.propensity, c.served_rank, c.expanded, c.previewed"
        " FROM queries q JOIN query_candidates c ON c.query_id = q.id"
    ).fetchall()
    rows = [r[:4] for r in got if not r[4]]  # the previews it read whole are labelled as the shown ones
    assert {used for shown, used, _, _ in rows if not shown} == {None}  # an unshown candidate is never a negative
    read = [r for r in got if r[4]]
    assert read and all(r[5] and not r[0] and r[1] is not None for r in read)  # previewed, read, labelled
    assert {used is not None for shown, used, _, _ in rows if shown} == {True}  # shown: cited or ignored
    assert all(p == 1.0 for shown, _, p, _ in rows if shown) and all(p == 0.0 for shown, _, p, _ in rows if not shown)
    assert all(sr is not None for shown, _, _, sr in rows if shown)
    assert sum(used is True for _, used, *_ in got) == json.loads(r.stdout)["used"] > 0
    assert len(read) == json.loads(r.stdout)["expanded"]


def test_a_hot_swap_mid_replay_keeps_each_querys_version_in_the_log(db_url, tmp_path, conn, first_stage_service):
    """On-policy replay: the champion changes while the consumer replays; every query's log row names the
    version that served it (what its labels were earned under), the swap loses no query and no label."""
    import httpx

    from retrieval.logs import deployments
    from serving.hotswap import HotSwapper
    from serving.picker import Picker
    from serving.selectors import FirstStageSelector
    from serving.server import BackgroundServer

    class Reverse:  # a fast selector that is easy to tell from the first-stage order
        answers_inline = True

        def __init__(self, version):
            self.version = version

        def answer(self, query, cands, k, query_vec=None):
            return json.dumps({"selected": list(range(len(cands), 0, -1))[:k]})

    picker = Picker(FirstStageSelector(), timeout_s=5)
    svc = first_stage_service(
        picker,
        swapper=HotSwapper(picker, db_url, canary_timeout_s=5, grace_s=0, build=lambda r: Reverse(r["version"])),
    )
    topics = ["bees", "rivers", "compilers", "glaciers", "violins", "tides", "lichens", "comets"]
    queries = [ReplayQuery(str(i), f"how do {t} work?", frozenset({t})) for i, t in enumerate(topics)]
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for t in topics:
            client.post("/ingest", json={"source": f"notes.jsonl#{t}", "text": f"# {t}\n\nHow {t} work, in short."})

        served = []

        def swap_after_the_fourth():
            served.append(client.get("/selector").json()["version"])
            if len(served) == 4:
                deployments.announce(conn, {"kind": "reverse", "version": "v2"}, "promote")
                wait_for(lambda: client.get("/selector").json()["version"] == "v2", 15)

        summary = replay(server.url, queries, swap_after_the_fourth, ReplayParams(consumer="realistic", miss_rate=0.0))
    assert summary.queries == 8 and not summary.errors
    rows = conn.execute(
        "SELECT q.text, q.selector_version, count(c.used) FROM queries q JOIN query_candidates c ON c.query_id = q.id"
        " GROUP BY q.id ORDER BY q.id"
    ).fetchall()
    assert [r[0] for r in rows] == [q.query for q in queries]
    assert [r[1] for r in rows] == ["first-stage"] * 4 + ["v2"] * 4  # each query as served, the swap between
    assert all(labels >= 1 for _, _, labels in rows)  # every query's feedback landed on its own row
