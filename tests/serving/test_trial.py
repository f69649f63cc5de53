"""A trial by interleaving against a real Postgres and real services over HTTP: team-draft attribution in the
log, citations credited to their teams, the rule's decision (a promotion hot-swaps every service), two services
running one trial, and a restarted service resuming it."""

import contextlib
import json

import httpx
import pytest

from retrieval.contracts.interleaving import CHALLENGER, CHAMPION, TrialParams
from retrieval.db import connect
from retrieval.logs import deployments, trials
from serving.hotswap import HotSwapper
from serving.picker import Picker
from serving.selectors import FIRST_STAGE_RECORD, FirstStageSelector
from serving.server import BackgroundServer
from tests.waiting import wait_for

NOTES = ("bees", "rivers", "compilers", "volcanoes", "tides", "orchids", "glaciers", "comets")
RULE = TrialParams(share=1.0, max_judged=60)  # every query interleaved: a short test
CHALLENGER_RECORD = {"kind": "reverse", "version": "challenger-v2"}


class Reverse:
    """Ranks the candidates bottom-up: easy to tell from the first-stage order."""

    answers_inline = True

    def __init__(self, version):
        self.version = version

    def answer(self, query, cands, k, query_vec=None):
        return json.dumps({"selected": list(range(len(cands), 0, -1))[:k]})


class SlowReverse(Reverse):
    """A slow selector (an LLM's kind): outside a trial it refines in the background; on trial it answers inline."""

    answers_inline = False


class Broken(Reverse):
    def answer(self, query, cands, k, query_vec=None):
        return "no idea"


def build(record):
    kinds = {"reverse": Reverse, "slow": SlowReverse, "broken": Broken, "first-stage": lambda v: FirstStageSelector()}
    return kinds[record["kind"]](record["version"])


@contextlib.contextmanager
def running_service(first_stage_service, db_url, seed=0):
    picker = Picker(FirstStageSelector(), timeout_s=5, seed=seed, token_budget=1, min_chunks=3, previews=5)  # 3 + 5
    svc = first_stage_service(picker, swapper=HotSwapper(picker, db_url, canary_timeout_s=5, grace_s=0, build=build))
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def notes(db_url, first_stage_service):
    with running_service(first_stage_service, db_url) as client:
        for name in NOTES:
            client.post(
                "/ingest", json={"source": name, "text": f"# {name}\n\nA note about {name}."}
            ).raise_for_status()


def ask_and_cite(client, team: str, query: str = "how do bees make honey?") -> dict:
    """One trial query; the answer cites the first context item the given team placed."""
    r = client.post("/query", json={"query": query}).json()
    with connect(client.db_url) as conn:
        teams = dict(
            conn.execute(
                "SELECT rank, team FROM query_candidates WHERE query_id = %s AND shown", (r["query_id"],)
            ).fetchall()
        )
    cite = next(c["rank"] for c in r["context"] if teams[c["rank"]] == team)
    return client.post("/feedback", json={"query_id": r["query_id"], "answer": f"So it is [{cite}]."}).json()


def start(db_url, record=CHALLENGER_RECORD, rule=RULE):
    with connect(db_url) as conn:
        return trials.start(conn, dict(FIRST_STAGE_RECORD), record, rule)


@pytest.mark.parametrize("kind", ["reverse", "slow"])  # a ranker's kind, and an LLM's (the same trial)
def test_trial_queries_are_interleaved_and_each_shown_chunk_logs_its_team(notes, db_url, first_stage_service, kind):
    with running_service(first_stage_service, db_url) as client:
        trial = start(db_url, {"kind": kind, "version": f"{kind}-v2"})
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        r = client.post("/query", json={"query": "rivers and tides"}).json()
        assert r["selector_version"] == f"trial:{trial.id}"
        with connect(db_url) as conn:
            (logged,) = conn.execute("SELECT trial_id FROM queries WHERE id = %s", (r["query_id"],)).fetchone()
            rows = conn.execute(
                "SELECT rank, shown, team FROM query_candidates WHERE query_id = %s ORDER BY rank", (r["query_id"],)
            ).fetchall()
        assert logged == trial.id
        shown = [(rank, team) for rank, s, team in rows if s]
        assert [rank for rank, _ in shown] == sorted(c["rank"] for c in r["context"])
        assert {team for _, team in shown} == {CHAMPION, CHALLENGER}  # both teams placed items
        # a preview carries the side whose top 3 alone held it (the rest of each side's own); nothing else unshown does
        listed = {c["rank"] for c in r["previews"]}
        assert all(team is None for rank, s, team in rows if not s and rank not in listed)
        previewed = {rank: team for rank, s, team in rows if rank in listed}
        assert {previewed[x] for x in (2, 3, len(rows) - 1, len(rows) - 2) if x in previewed} == {CHAMPION, CHALLENGER}
        assert all(previewed[x] is None for x in range(4, len(rows) - 2) if x in previewed)
        # the champion's best (rank 1) and the challenger's best (the last candidate) are both in the context
        assert {1, len(rows)} <= {c["rank"] for c in r["context"]}
        stats = client.get("/stats").json()["trial"]
        assert stats["id"] == trial.id and stats["served_here"] and stats["evidence"]["judged"] == 0
        # each shown chunk's propensity is its chance over the draft's coins: each side's best always, what only one
        # side ranks below its best less often; their sum is the context's size
        with connect(db_url) as conn:
            p = dict(
                conn.execute(
                    "SELECT rank, propensity FROM query_candidates WHERE query_id = %s AND shown", (r["query_id"],)
                ).fetchall()
            )
        assert p[1] == p[len(rows)] == 1.0 and all(0 < v <= 1 for v in p.values())
        assert any(v < 1 for v in p.values())


def test_citations_of_the_challengers_team_promote_it_and_every_service_swaps(notes, db_url, first_stage_service):
    with (
        running_service(first_stage_service, db_url, seed=1) as one,
        running_service(first_stage_service, db_url, seed=2) as two,
    ):
        one.db_url = two.db_url = db_url
        trial = start(db_url)
        for c in (one, two):
            wait_for(lambda c=c: c.get("/selector").json()["trial"] == trial.id)
        decided = None
        for i in range(RULE.max_judged):  # two services, one trial: the feedback alternates between them
            out = ask_and_cite((one, two)[i % 2], CHALLENGER)
            if "trial" in out:
                decided = out["trial"]
                break
        assert decided is not None and decided["status"] == "promoted", decided
        assert 10 <= i < 30  # straight wins decide quickly, not at once
        with connect(db_url) as conn:
            closed = trials.get(conn, trial.id)
            dep = deployments.latest(conn)
        assert closed.evidence["wins"] == i + 1 and closed.evidence["losses"] == 0
        assert dep.id == closed.deployment_id and dep.version == "challenger-v2" and dep.action == "promote"
        for c in (one, two):  # the promotion hot-swaps both, and the trial arm is gone
            wait_for(lambda c=c: c.get("/selector").json()["version"] == "challenger-v2")
            wait_for(lambda c=c: c.get("/selector").json()["trial"] is None)
        r = one.post("/query", json={"query": "comets"}).json()
        assert r["selector_version"] == "challenger-v2"


def test_citations_of_the_champions_team_reject_the_challenger(notes, db_url, first_stage_service):
    with running_service(first_stage_service, db_url) as client:
        client.db_url = db_url
        trial = start(db_url)
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        for _ in range(RULE.max_judged):
            out = ask_and_cite(client, CHAMPION)
            if "trial" in out:
                break
        assert out["trial"]["status"] == "rejected"
        assert client.get("/selector").json()["version"] == "first-stage"  # the champion stays
        with connect(db_url) as conn:
            assert trials.get(conn, trial.id).evidence["losses"] > 0 and deployments.latest(conn) is None


def test_a_citation_of_a_chunk_neither_side_would_serve_credits_no_team(notes, db_url, first_stage_service):
    with running_service(first_stage_service, db_url) as client:
        trial = start(db_url)
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        r = client.post("/query", json={"query": "orchids"}).json()
        # the champion's top 3 are candidates 1-3, the challenger's the last 3: the 4th is neither's own
        assert 4 not in {x["rank"] for x in r["context"]}
        client.post("/feedback", json={"query_id": r["query_id"], "answer": "Maybe [4]."})
        with connect(db_url) as conn:
            v = trials.verdict(conn, trials.get(conn, trial.id), lambda rec: rec)
        assert (v.wins, v.losses, v.judged) == (0, 0, 0)


def test_a_cited_preview_of_one_sides_own_credits_that_side(notes, db_url, first_stage_service):
    # the context of 3 holds the first two of the draft and one more; the draft's rest, each side's own items it
    # left out, are the first previews: a consumer that reads one whole and cites it judges the query
    with running_service(first_stage_service, db_url) as client:
        trial = start(db_url)
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        tally = {CHAMPION: 0, CHALLENGER: 0}
        for query in ("orchids", "comets", "glaciers", "bees and honey"):
            r = client.post("/query", json={"query": query}).json()
            with connect(db_url) as conn:
                team = dict(
                    conn.execute(
                        "SELECT rank, team FROM query_candidates WHERE query_id = %s AND previewed AND team IS NOT NULL",
                        (r["query_id"],),
                    ).fetchall()
                )
            rank, side = next(iter(team.items()))  # the first preview with a side
            assert rank in {c["rank"] for c in r["previews"]} and rank not in {c["rank"] for c in r["context"]}
            client.post("/expand", json={"query_id": r["query_id"], "n": rank}).raise_for_status()
            client.post("/feedback", json={"query_id": r["query_id"], "answer": f"So it is [{rank}]."})
            tally[side] += 1
            with connect(db_url) as conn:
                v = trials.verdict(conn, trials.get(conn, trial.id), lambda rec: rec)
            assert (v.wins, v.losses, v.judged) == (tally[CHALLENGER], tally[CHAMPION], sum(tally.values()))


def test_each_trial_query_is_read_once_and_again_when_its_feedback_changes(notes, db_url, first_stage_service):
    """The outcomes kept beside the log (migration 022): a settle reads the queries logged or changed since the last
    one, and the rest from their rows; a changed feedback is read again, a deleted query leaves the tally."""

    def kinds():
        with connect(db_url) as conn:
            return dict(conn.execute("SELECT query_id, kind FROM trial_outcomes WHERE trial_id = %s", (trial.id,)))

    def tally():
        with connect(db_url) as conn:
            v = trials.verdict(conn, trials.get(conn, trial.id), lambda rec: rec)
        return v.wins, v.losses, v.ties

    with running_service(first_stage_service, db_url) as client:
        client.db_url = db_url
        trial = start(db_url)
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        won = ask_and_cite(client, CHALLENGER)
        assert kinds() == {won["query_id"]: "win"} and tally() == (1, 0, 0)  # the settle after the feedback kept it
        unanswered = client.post("/query", json={"query": "comets"}).json()["query_id"]
        assert tally() == (1, 0, 0) and kinds()[unanswered] == "none"  # logged, not cited: not counted
        with connect(db_url) as conn:  # a kept row is read as it is while its query does not change...
            conn.execute("UPDATE trial_outcomes SET kind = 'tie' WHERE query_id = %s", (won["query_id"],))
        assert tally() == (0, 0, 1)
        with connect(db_url) as conn:
            teams = dict(
                conn.execute(
                    "SELECT rank, team FROM query_candidates WHERE query_id = %s AND shown", (won["query_id"],)
                ).fetchall()
            )
        loser = next(rank for rank, team in teams.items() if team == CHAMPION)
        # ...and read again once its feedback changes: the answer now cites the champion's own chunk
        again = client.post("/feedback", json={"query_id": won["query_id"], "answer": f"No, [{loser}]."}).json()
        assert again.get("replaced") and kinds()[won["query_id"]] == "loss" and tally() == (0, 1, 0)
        with connect(db_url) as conn:  # a query gone from the log (retention) leaves the tally with its row
            conn.execute("DELETE FROM queries WHERE id = %s", (won["query_id"],))
        assert tally() == (0, 0, 0) and won["query_id"] not in kinds()


def test_a_restarted_service_resumes_the_running_trial_and_its_tallies(notes, db_url, first_stage_service):
    trial = start(db_url)
    with running_service(first_stage_service, db_url) as client:
        client.db_url = db_url
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        for _ in range(3):
            ask_and_cite(client, CHALLENGER)
    with running_service(first_stage_service, db_url) as client:  # a new process would read the same rows
        client.db_url = db_url
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        assert client.get("/stats").json()["trial"]["evidence"]["wins"] == 3
        ask_and_cite(client, CHALLENGER)
        assert client.get("/stats").json()["trial"]["evidence"]["wins"] == 4


def test_a_challenger_that_fails_its_canary_is_not_served(notes, db_url, first_stage_service):
    with running_service(first_stage_service, db_url) as client:
        trial = start(db_url, {"kind": "broken", "version": "bad"})
        wait_for(lambda: "not served here" in (client.get("/selector").json()["last_error"] or ""))
        assert client.get("/selector").json()["trial"] is None
        assert client.post("/query", json={"query": "bees"}).json()["selector_version"] == "first-stage"
        assert client.get("/stats").json()["trial"]["id"] == trial.id  # still running: other services may serve it


def test_the_trial_credits_by_the_one_definition_of_used(notes, db_url, first_stage_service):
    """A query rated -1 (its context did not answer) has its citations voided: no win for anyone."""
    with running_service(first_stage_service, db_url) as client:
        client.db_url = db_url
        trial = start(db_url)
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        ask_and_cite(client, CHALLENGER)
        r = client.post("/query", json={"query": "volcanoes"}).json()
        with connect(db_url) as conn:
            teams = dict(conn.execute("SELECT rank, team FROM query_candidates WHERE query_id = %s", (r["query_id"],)))
        cite = next(rank for rank, team in teams.items() if team == CHALLENGER)
        client.post("/feedback", json={"query_id": r["query_id"], "answer": f"Yes [{cite}].", "rating": -1})
        evidence = client.get("/stats").json()["trial"]["evidence"]
        assert (evidence["wins"], evidence["judged"]) == (1, 1)  # the first query's win; the voided one is no query


def test_a_challenger_that_serves_the_champions_context_is_never_judged(notes, db_url, first_stage_service):
    """Citations of a context both sides would have served alike say nothing of which is better: counted as the
    same, not as ties, so a trial is decided by the queries where the two differ."""
    with running_service(first_stage_service, db_url) as client:
        trial = start(db_url, {"kind": "first-stage", "version": "first-stage-again"})
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        for query in ("bees", "comets", "tides"):
            r = client.post("/query", json={"query": query}).json()
            assert r["selector_version"] == f"trial:{trial.id}"
            client.post("/feedback", json={"query_id": r["query_id"], "answer": "It is so [1]."}).raise_for_status()
        with connect(db_url) as conn:
            teams = {t for (t,) in conn.execute("SELECT team FROM query_candidates WHERE shown AND team IS NOT NULL")}
        assert teams == {"both"}
        evidence = client.get("/stats").json()["trial"]["evidence"]
        assert (evidence["judged"], evidence["same"], evidence["decision"]) == (0, 3, None)


def test_the_share_of_interleaved_queries_rises_with_the_evidence_for_the_challenger(
    notes, db_url, first_stage_service
):
    rule = TrialParams(share=0.25, max_share=1.0, alpha=0.001, max_judged=200)  # decides at 1000: room to rise first
    with running_service(first_stage_service, db_url) as client:
        trial = start(db_url, rule=rule)
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        on_trial = f"trial:{trial.id}"

        def interleaved(n: int) -> int:
            return sum(
                client.post("/query", json={"query": "bees"}).json()["selector_version"] == on_trial for _ in range(n)
            )

        assert 2 <= interleaved(60) <= 30  # a quarter of them, at first
        assert client.get("/stats").json()["trial"]["share_now"] == 0.25
        evidence = 1.0
        while evidence < 4:  # the challenger's own chunks cited on the trial's queries: its evidence grows
            r = client.post("/query", json={"query": "how do bees make honey?"}).json()
            if r["selector_version"] != on_trial:
                continue
            with connect(db_url) as conn:
                teams = dict(
                    conn.execute(
                        "SELECT rank, team FROM query_candidates WHERE query_id = %s AND shown", (r["query_id"],)
                    ).fetchall()
                )
            cite = next(c["rank"] for c in r["context"] if teams[c["rank"]] == CHALLENGER)
            out = client.post("/feedback", json={"query_id": r["query_id"], "answer": f"So it is [{cite}]."}).json()
            assert "trial" not in out  # not decided yet
            with connect(db_url) as conn:
                stored = trials.get(conn, trial.id).evidence  # settled after each feedback, stored while running
            assert stored["wins"] > 0 and stored["losses"] == 0
            evidence = stored["evidence_for"]
        assert client.get("/stats").json()["trial"]["share_now"] == 1.0
        assert interleaved(30) == 30  # every query now: the trial gathers its evidence faster
    with connect(db_url) as conn:  # a trial registered before the share could rise keeps its share fixed
        conn.execute("UPDATE selector_trials SET rule = rule - 'max_share' WHERE id = %s", (trial.id,))
        assert trials.get(conn, trial.id).rule.share_at(evidence) == 0.25
