"""The HTTP API's request bodies (serving/schemas.py), as JSON the way a client sends it: strict types, closed
bodies, only storable text, no blank lines, ids that fit a bigint, ratings of +1 or -1."""

import json

import pytest
from pydantic import ValidationError

from serving.schemas import MAX_ID, CaptureIn, FeedbackIn, IngestIn, QueryIn


def refused(model, body: dict) -> str:
    """The one problem pydantic finds in `body`, as `field: message`."""
    with pytest.raises(ValidationError) as e:
        model.model_validate_json(json.dumps(body))
    (err,) = e.value.errors()
    return f"{'.'.join(map(str, err['loc']))}: {err['msg']}"


def test_good_bodies_are_taken_as_sent():
    assert QueryIn.model_validate_json('{"query": "bees?", "inline": true}').inline is True
    fb = FeedbackIn.model_validate_json(json.dumps({"query_id": MAX_ID, "used_chunk_ids": [1, 2], "rating": -1}))
    assert (fb.query_id, fb.used_chunk_ids, fb.rating, fb.answer) == (MAX_ID, [1, 2], -1, None)
    assert IngestIn.model_validate_json('{"source": "n", "text": "# N"}').kind == "markdown"
    assert CaptureIn.model_validate_json('{"user": "", "assistant": "An answer."}').user == ""  # an empty turn is ok


def test_types_are_strict_and_bodies_closed():
    assert refused(QueryIn, {"query": "q", "inline": 1}) == "inline: Input should be a valid boolean"
    assert refused(QueryIn, {"qeury": "q", "query": "q"}) == "qeury: Extra inputs are not permitted"
    assert refused(FeedbackIn, {"query_id": "4"}) == "query_id: Input should be a valid integer"
    assert refused(FeedbackIn, {"query_id": 1, "rating": True}) == "rating: Input should be a valid integer"
    assert refused(IngestIn, {"source": "n", "text": "t", "kind": "pdf"}).startswith("kind: Input should be")


def test_text_must_be_storable_lines_not_blank_ids_in_range_ratings_one():
    assert refused(QueryIn, {"query": "a\u0000b"}) == "query: Value error, contains a NUL character"
    assert refused(QueryIn, {"query": "  \n "}) == "query: Value error, must not be blank"
    assert refused(CaptureIn, {"user": "q", "assistant": "\t"}) == "assistant: Value error, must not be blank"
    assert refused(IngestIn, {"source": "n", "text": "t", "title": "a\u0000"}).startswith("title: Value error")
    assert refused(FeedbackIn, {"query_id": 0}).startswith("query_id: Input should be greater than or equal to 1")
    assert refused(FeedbackIn, {"query_id": MAX_ID + 1}).startswith("query_id: Input should be less than or equal")
    assert refused(FeedbackIn, {"query_id": 1, "rating": 2}) == "rating: Value error, must be +1 or -1"
