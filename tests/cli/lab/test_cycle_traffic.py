"""The demo's traffic after a retrain (`cli.lab.cycle_steps.traffic`), against a real service running a real trial: the new
claims are served once (what users got), then asked again in fresh passes until the trial's own rule decides; a
challenger that buries every relevant note is rejected, and the champion stays."""

from __future__ import annotations

from cli.lab.cycle_steps import cycle_line, traffic
from cli.lab.replay import ReplayQuery
from eval.consumer import ReplayParams
from retrieval.contracts.interleaving import TrialParams
from retrieval.db import connect
from retrieval.logs import trials
from serving.selectors import FIRST_STAGE_RECORD
from tests.serving.test_trial import NOTES, running_service
from tests.waiting import wait_for


class Bar:
    """The progress bar's calls, counted."""

    def __init__(self):
        self.advanced = 0

    def add_task(self, *a, **kw):
        return 0

    def advance(self, task, n=1):
        self.advanced += n

    def update(self, *a, **kw):
        pass


def test_the_traffic_goes_on_until_the_trial_decides(db_url, first_stage_service, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)  # the demo reads its trial where the service logs it
    claims = [ReplayQuery(n, f"Tell me about {n}.", frozenset({f"webhook:{n}"})) for n in NOTES]
    consumer = ReplayParams(miss_rate=0.0, false_cite_rate=0.0, previews_read=0)
    with running_service(first_stage_service, db_url) as client:
        for n in NOTES:
            client.post("/ingest", json={"source": n, "text": f"# {n}\n\nA note about {n}."}).raise_for_status()
        with connect(db_url) as conn:
            trial = trials.start(
                conn,
                dict(FIRST_STAGE_RECORD),
                {"kind": "reverse", "version": "buries-v2"},
                TrialParams(share=0.5, max_judged=40),
            )
        wait_for(lambda: client.get("/selector").json()["trial"] == trial.id)
        bar = Bar()
        first, closed = traffic(str(client.base_url), claims, trial.id, consumer, 1, bar)
        served = client.get("/selector").json()["version"]
    assert first["queries"] == len(NOTES) and first["errors"] == 0  # the first pass: what users got
    assert closed["id"] == trial.id and closed["status"] == "rejected", closed
    assert closed["queries_asked"] > len(NOTES) and closed["queries_asked"] % len(NOTES) == 0  # whole passes
    assert bar.advanced == closed["queries_asked"] and served == "first-stage"  # the champion stays
    # what the trial could see, by the claims' judgements: the champion alone showed the relevant note, and with no
    # false cites no outcome was decided by a note that was not relevant
    saw = closed["audit"]
    assert saw["questions"] == len(NOTES) and saw["decided_by_not_relevant"] == {"win": 0, "loss": 0}
    assert saw["questions_with_own_relevant"]["challenger"] == 0 < saw["questions_with_own_relevant"]["champion"]


def test_the_cycle_line_says_what_the_trial_could_see():
    row = {
        "cycle": 2,
        "challenger": "pai-selector:2",
        "vs_general": {"scifact-test": {"recall@5_diff": 0.042, "ci95_low": 0.023, "ci95_high": 0.065}},
        "served_by": "pai-selector:1",
        "champion": "pai-selector:1",
        "served": {
            "queries": 270,
            "served_recall": 0.82,
            "general_recall": 0.821,
            "expanded": 139,
            "expanded_relevant": 53,
            "preview_token_share": 0.143,
        },
        "trial": {
            "id": 2,
            "status": "stopped",
            "queries_asked": 10260,
            "evidence": {"judged": 544, "wins": 22, "losses": 33, "same": 1042},
            "audit": {
                "questions": 270,
                "questions_with_own_relevant": {"champion": 4, "challenger": 4},
                "decided_by_not_relevant": {"win": 13, "loss": 17},
            },
        },
    }
    line = cycle_line(row)
    assert "vs general on SciFact test +0.042 [+0.023, +0.065]" in line
    assert "trial 2: stopped after 544 judged trial queries (22 wins, 33 losses" in line
    assert "relevant chunk on 4 (challenger) and 4 (champion) of 270 questions" in line
    assert "13 wins and 17 losses a chunk that was not relevant decided" in line
    assert "+14.3% tokens" in line
