"""What the MCP tools say to a model (serving/mcp_tools.py): literal results in, literal text out."""

from serving.mcp_tools import CaptureOut, FeedbackOut, feedback_text


def out(**kw) -> FeedbackOut:
    base = {"query_id": 5, "used_ranks": [], "not_shown": [], "unknown": [], "answer_recorded": True, "replaced": {}}
    return FeedbackOut(**(base | kw))


def test_feedback_says_what_it_labelled_what_missed_and_what_it_replaced():
    assert feedback_text(out(used_ranks=[2])) == "recorded for query 5: used [2]"
    assert feedback_text(
        out(used_ranks=[3], not_shown=[12], unknown=[99], replaced={"used_ranks": [2], "rating": 1})
    ) == (
        "recorded for query 5: used [3]; [12] not in the context you were given (no label); "
        "[99] no candidate of this query (no label); replaced the earlier used_ranks [2], rating 1"
    )
    assert feedback_text(out(not_shown=[12], answer_recorded=False)) == (
        "nothing labelled for query 5: no citation of the answer was in its context; "
        "[12] not in the context you were given (no label); cite only the [n] that `context` returned with this query_id"
    )
    long = feedback_text(out(replaced={"answer": "x" * 100}))
    assert long.endswith("answer '" + "x" * 57 + "...'")


def test_a_capture_reads_as_what_became_of_it():
    assert CaptureOut(id=7, status="pending").summary()[0].startswith("capture 7: pending; `capture_result`")
    stored = CaptureOut(id=7, status="stored", gate="store", decided_by="rules", fact_ids=[41, 42])
    assert stored.summary()[0] == "capture 7: stored (gate store), facts [41, 42]"
    rejected = CaptureOut(id=8, status="rejected", gate="length", reason="12 characters of prose < 80")
    assert rejected.summary()[0] == "capture 8: rejected (gate length, 12 characters of prose < 80)"
