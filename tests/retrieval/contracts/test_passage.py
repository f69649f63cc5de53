"""A passage's text, defined once (`retrieval.contracts.passage`); that ingest stores exactly its vector is
tested with the service's ranker (tests/serving/test_ranker.py)."""

from retrieval.contracts.passage import passage_text


def test_the_heading_path_goes_above_the_text():
    assert passage_text("Rollback", "To roll back ...", "Deployment") == "Deployment / Rollback\nTo roll back ..."
    assert passage_text("Rollback", "To roll back ...") == "Rollback\nTo roll back ..."
    assert passage_text(None, "To roll back ...", "Deployment") == "Deployment\nTo roll back ..."


def test_no_heading_or_a_text_that_opens_with_its_own_heading_is_taken_as_it_is():
    assert passage_text(None, "x") == "x" and passage_text("", "x", "") == "x"
    assert passage_text("Rollback", "## Rollback\nTo roll back ...", "Deployment") == "## Rollback\nTo roll back ..."
