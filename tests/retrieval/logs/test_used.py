"""The one definition of used, literal: a pulled record in, the record its readers learn from out."""

from retrieval.logs.used import label_changes, used_labels
from retrieval.params import UsedParams

ASPIRIN = "Aspirin lowers fever in adults within two hours of a single dose."
BEES = "Bees communicate the distance of flowers through a waggle dance."
ON = UsedParams()  # params.yaml's: min_uncited 0.8, void_thumbs_down


def cand(rank, text, used, shown=True):
    return {"rank": rank, "text": text, "used": used, "shown": shown}


def record(answer, cands, rating=None):
    return {"query_id": 1, "query": "q", "rating": rating, "answer": answer, "candidates": cands}


def test_a_thumbs_down_voids_the_citations_of_its_context_only():
    """Rated -1, the context did not answer: what its answer cited there is not a use. A judge's label outside
    the context (shown False) stays, a row logged before exposure was recorded (shown None) stays, an
    unlabelled candidate stays unlabelled; rated +1, or with void_thumbs_down off, the citation counts."""
    cands = [cand(1, ASPIRIN, False), cand(2, BEES, True), cand(3, BEES, True, False), cand(4, BEES, True, None)]
    down = record(None, [*cands, cand(5, ASPIRIN, None, False)], rating=-1)
    assert used_labels(down, ON) == record(
        None,
        [
            cand(1, ASPIRIN, False),
            cand(2, BEES, False),
            cand(3, BEES, True, False),
            cand(4, BEES, True, None),
            cand(5, ASPIRIN, None, False),
        ],
        rating=-1,
    )
    assert used_labels(down, UsedParams(void_thumbs_down=False)) is down
    up = {**down, "rating": 1}
    assert used_labels(up, ON) is up


def test_the_answer_is_read_again():
    """[2] on chunk 1's claim: it stands (a citation is never taken back by its sentence). Chunk 1 quoted without
    its [n]: used (min_uncited 0.8, on by default); off, as logged."""
    rec = record("Aspirin lowers fever in adults within two hours [2].", [cand(1, ASPIRIN, False), cand(2, BEES, True)])
    assert used_labels(rec, ON) == record(rec["answer"], [cand(1, ASPIRIN, False), cand(2, BEES, True)])
    quoted = record("Aspirin lowers fever in adults within two hours.", [cand(1, ASPIRIN, False), cand(2, BEES, True)])
    assert used_labels(quoted, ON) == record(quoted["answer"], [cand(1, ASPIRIN, True), cand(2, BEES, True)])
    assert used_labels(quoted, UsedParams(min_uncited=0.0, void_thumbs_down=False)) is quoted


def test_a_thumbs_down_voids_what_the_answer_grounds_too():
    """Rated -1: an uncited quote of a shown chunk is no use either (the context did not answer)."""
    quoted = record("Aspirin lowers fever in adults within two hours.", [cand(1, ASPIRIN, False), cand(2, BEES, True)])
    assert used_labels({**quoted, "rating": -1}, ON)["candidates"] == [cand(1, ASPIRIN, False), cand(2, BEES, False)]


def test_a_record_without_an_answer_or_labels_comes_back_as_is():
    bare = record(None, [cand(1, ASPIRIN, None, False), cand(2, BEES, None, False)], rating=-1)
    assert used_labels(bare, ON) == bare
    logged = record(None, [cand(1, ASPIRIN, True), cand(2, BEES, False)])
    assert used_labels(logged, ON) is logged


def test_label_changes_counts_each_change_by_what_it_ended_as():
    misattributed = record("Aspirin lowers fever in adults [2].", [cand(1, ASPIRIN, False), cand(2, BEES, True)])
    quoted = record("Bees communicate the distance of flowers.", [cand(1, ASPIRIN, False), cand(2, BEES, False)])
    down = record("From the notes [1][2]", [cand(1, ASPIRIN, True), cand(2, BEES, True)], rating=-1)
    records = [misattributed, quoted, down, {**quoted, "rating": -1}]
    relabelled = [used_labels(r, ON) for r in records]
    assert label_changes(records, relabelled) == {
        "uncited_quotes_used": 1,  # quoted's chunk 2
        "thumbs_down_voided": 2,  # down's [1][2]; the -1 copy of quoted: a quote voided is no change
    }


def test_the_knobs_are_checked():
    assert ON.problems() == []
    assert UsedParams(min_uncited=1.5).problems() == ["used: need min_uncited in [0, 1]"]
