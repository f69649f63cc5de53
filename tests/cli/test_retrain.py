"""`pai retrain` on a store whose log is too thin to learn from: one line saying how much more is needed."""

from typer.testing import CliRunner

from cli.main import app
from retrieval.logs import feedback
from retrieval.query.search import Candidate


def test_retrain_on_a_thin_log_says_how_much_more_feedback_it_needs(conn, db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cand = Candidate(1, 1, "notes/a.md", None, None, 1, 2, "A note.", "h1", 0.9, 3, 1)
    for i in range(4):  # four queries, one answer citing what it was shown, one citing nothing
        qid = feedback.log_query(conn, f"question {i}", [cand], "first-stage", [1], shown=[1])
        if i < 2:
            feedback.record_feedback(conn, qid, answer="Yes [1]." if i == 0 else "No idea.")
    r = CliRunner().invoke(app, ["retrain"])
    assert r.exit_code == 2
    assert "has 1 queries whose answer cited a shown chunk; 29 more are needed" in r.output, r.output
