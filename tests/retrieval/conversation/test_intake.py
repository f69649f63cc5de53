"""Intake: an exchange that cannot be captured is refused with one line and the HTTP status the service answers."""

import pytest

from retrieval.conversation.intake import CaptureInputError, parse_exchange


@pytest.mark.parametrize(
    "obj,why,status",
    [
        ([], "expected a JSON object", 422),
        ({"user": "q"}, "assistant: missing", 422),
        ({"user": "q", "assistant": 3}, "assistant: must be a string", 422),
        ({"user": "q", "assistant": "a\x00b"}, "assistant: contains a NUL", 422),
        ({"user": "\ud800", "assistant": "a"}, "user: is not valid Unicode", 422),
        ({"user": "q", "assistant": "   "}, "assistant: must not be blank", 422),
        ({"user": "q", "assistant": "a", "extra": 1}, "extra: unknown field", 422),
        ({"user": "q", "assistant": "a" * 101}, "over the 100-character limit", 413),
    ],
)
def test_parse_exchange_refuses_with_one_line(obj, why, status):
    with pytest.raises(CaptureInputError, match=why) as e:
        parse_exchange(obj, 100)
    assert e.value.status == status and "\n" not in str(e.value)
