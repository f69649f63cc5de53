"""The one definition of used, literal: a pulled record in, the record its readers learn from out."""

from retrieval.logs.used import label_changes, used_labels
from retrieval.params import UsedParams
from tests.feedback_records import candidate, record

ASPIRIN = "Aspirin lowers fever in adults within two hours of a single dose."
BEES = "Bees communicate the distance of flowers through a waggle dance."
ON = UsedParams()  # params.yaml's: min_uncited 0.8, void_thumbs_down


def test_a_thumbs_down_voids_the_citations_of_its_context_only():
    """Rated -1, the context did not answer: what its answer cited there is not a use. A judge's label outside
    the context (shown False) stays, a row logged before exposure was recorded (shown None) stays, an
    unlabelled candidate stays unlabelled; rated +1, or with void_thumbs_down off, the citation counts."""
    cands = [
        candidate(1, False, text=ASPIRIN),
        candidate(2, True, text=BEES),
        candidate(3, True, False, text=BEES),
        candidate(4, True, None, text=BEES),
    ]
    down = record(answer=None, candidates=[*cands, candidate(5, None, False, text=ASPIRIN)], rating=-1)
    assert used_labels(down, ON) == record(
        [
            candidate(1, False, text=ASPIRIN),
            candidate(2, False, text=BEES),
            candidate(3, True, False, text=BEES),
            candidate(4, True, None, text=BEES),
            candidate(5, None, False, text=ASPIRIN),
        ],
        rating=-1,
    )
    assert used_labels(down, UsedParams(void_thumbs_down=False)) is down
    up = {**down, "rating": 1}
    assert used_labels(up, ON) is up


def test_a_thumbs_down_voids_a_cited_preview_too():
    """A preview the consumer was given and cited in a query rated -1 is voided as a context citation is; a judge's
    label on a candidate it was never given (not shown, not listed) stays."""
    down = record(
        answer=None,
        candidates=[
            candidate(1, False, text=ASPIRIN),
            candidate(6, True, False, text=BEES, previewed=True, expanded=True),
            candidate(9, True, False, text=BEES, previewed=False),
        ],
        rating=-1,
    )
    out = used_labels(down, ON)
    assert [c["used"] for c in out["candidates"]] == [False, False, True]
    assert used_labels({**down, "rating": 1}, ON)["candidates"][1]["used"] is True


def test_the_answer_is_read_again():
    """[2] on chunk 1's claim: it stands (a citation is never taken back by its sentence). Chunk 1 quoted without
    its [n]: used (min_uncited 0.8, on by default); off, as logged."""
    rec = record(
        answer="Aspirin lowers fever in adults within two hours [2].",
        candidates=[candidate(1, False, text=ASPIRIN), candidate(2, True, text=BEES)],
    )
    assert used_labels(rec, ON) == record(
        answer=rec["answer"], candidates=[candidate(1, False, text=ASPIRIN), candidate(2, True, text=BEES)]
    )
    quoted = record(
        answer="Aspirin lowers fever in adults within two hours.",
        candidates=[candidate(1, False, text=ASPIRIN), candidate(2, True, text=BEES)],
    )
    assert used_labels(quoted, ON) == record(
        answer=quoted["answer"], candidates=[candidate(1, True, text=ASPIRIN), candidate(2, True, text=BEES)]
    )
    assert used_labels(quoted, UsedParams(min_uncited=0.0, void_thumbs_down=False)) is quoted


def test_a_thumbs_down_voids_what_the_answer_grounds_too():
    """Rated -1: an uncited quote of a shown chunk is no use either (the context did not answer)."""
    quoted = record(
        answer="Aspirin lowers fever in adults within two hours.",
        candidates=[candidate(1, False, text=ASPIRIN), candidate(2, True, text=BEES)],
    )
    assert used_labels({**quoted, "rating": -1}, ON)["candidates"] == [
        candidate(1, False, text=ASPIRIN),
        candidate(2, False, text=BEES),
    ]


def test_a_record_without_an_answer_or_labels_comes_back_as_is():
    bare = record(
        answer=None,
        candidates=[candidate(1, None, False, text=ASPIRIN), candidate(2, None, False, text=BEES)],
        rating=-1,
    )
    assert used_labels(bare, ON) == bare
    logged = record(answer=None, candidates=[candidate(1, True, text=ASPIRIN), candidate(2, False, text=BEES)])
    assert used_labels(logged, ON) is logged


def test_label_changes_counts_each_change_by_what_it_ended_as():
    misattributed = record(
        answer="Aspirin lowers fever in adults [2].",
        candidates=[candidate(1, False, text=ASPIRIN), candidate(2, True, text=BEES)],
    )
    quoted = record(
        answer="Bees communicate the distance of flowers.",
        candidates=[candidate(1, False, text=ASPIRIN), candidate(2, False, text=BEES)],
    )
    down = record(
        answer="From the notes [1][2]",
        candidates=[candidate(1, True, text=ASPIRIN), candidate(2, True, text=BEES)],
        rating=-1,
    )
    records = [misattributed, quoted, down, {**quoted, "rating": -1}]
    relabelled = [used_labels(r, ON) for r in records]
    assert label_changes(records, relabelled) == {
        "uncited_quotes_used": 1,  # quoted's chunk 2
        "thumbs_down_voided": 2,  # down's [1][2]; the -1 copy of quoted: a quote voided is no change
    }


def test_the_knobs_are_checked():
    assert ON.problems() == []
    assert UsedParams(min_uncited=1.5).problems() == ["used: need min_uncited in [0, 1]"]
