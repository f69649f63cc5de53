"""Citation grounding: the share of a citing sentence's content words the cited chunk holds."""

from retrieval.logs.grounding import best_sentence, citation_support, regrounded, uncited_support
from tests.feedback_records import candidate

CHUNKS = {
    1: "Aspirin lowers fever in adults within two hours of a single dose.",
    2: "Bees communicate the distance of flowers through a waggle dance.",
}


def test_a_quoted_or_paraphrased_citation_is_supported_and_a_misattributed_one_is_not():
    s = citation_support("Aspirin lowers fever in adults [1]. Bees communicate distances by dancing [2].", CHUNKS)
    assert s[1] == 1.0 and s[2] == 0.75  # "by dancing" is not in chunk 2: 3 of its 4 content words are
    s = citation_support("Aspirin lowers fever in adults [2].", CHUNKS)  # the claim is chunk 1's, cited as 2
    assert s == {2: 0.0}


def test_citations_without_a_sentence_to_judge_stand():
    # "From the notes" is two content words (too few), an unknown rank and a chunk without text are not judged
    assert citation_support("From the notes [1][2]", CHUNKS) == {}
    assert citation_support("Aspirin lowers fever [7].", CHUNKS) == {}
    # citations alone after the full stop cite the sentence before them; the best sentence per rank wins
    s = citation_support("Aspirin lowers fever in adults. [1]\nWasps sting [1].\nAspirin helps fever too [1]", CHUNKS)
    assert s == {1: 1.0}


def test_hostile_answers_do_not_break_it():
    assert citation_support("", CHUNKS) == {}
    assert citation_support("\x00 [1] \x00" * 1000, CHUNKS) == {}
    huge = "aspirin " * 200_000 + "[1]"
    assert citation_support(huge, CHUNKS) == {}  # one content word, however often: too few to judge by
    long = " ".join(f"{i:05d}x" for i in range(100_000)) + " aspirin [1]"
    assert citation_support(long, CHUNKS)[1] < 0.01


def test_best_sentence_quotes_what_answers_the_query():
    assert (
        best_sentence("Mice sleep. Aspirin lowers fever [3]. Cats purr.", "does aspirin lower fever")
        == "Aspirin lowers fever."
    )
    assert best_sentence("No full stop here", "anything") == "No full stop here"


def test_an_uncited_quote_is_a_use_and_labels_are_read_again_from_the_answer():
    # [2] on chunk 1's claim: a citation stands, whatever its sentence
    misattributed = {
        "answer": "Aspirin lowers fever in adults [2].",
        "candidates": [candidate(1, False, text=CHUNKS[1]), candidate(2, True, text=CHUNKS[2])],
    }
    assert [c["used"] for c in regrounded(misattributed, 0.8)["candidates"]] == [False, True]
    # chunk 1 quoted without its [n]: used; an unshown candidate holding the same words gets no label
    aspirin = "Aspirin lowers fever in adults, a trial found."
    quoted = {
        "answer": "Aspirin lowers fever in adults.",
        "candidates": [
            candidate(1, False, text=CHUNKS[1]),
            candidate(2, False, text=CHUNKS[2]),
            candidate(3, None, False, text=aspirin),
        ],
    }
    assert uncited_support(quoted["answer"], CHUNKS) == {1: 1.0, 2: 0.0}
    assert [c["used"] for c in regrounded(quoted, 0.8)["candidates"]] == [True, False, None]
    assert regrounded(quoted, 0.0) is quoted and regrounded({**quoted, "answer": None}, 0.8)["answer"] is None
