"""The memory bench's pure part (eval/bench/memory.py): a LoCoMo-shaped conversation read leniently, written as
chat logs and as a transcript that ingest reads as a conversation, contexts scored by containment."""

import json

from eval.bench import memory
from retrieval.corpus.ingest import chunks_of
from retrieval.corpus.transcripts import read_any
from retrieval.dialogue import is_chat_log, parse_chat_log
from retrieval.params import IngestParams

CONV = {
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey cat named Miso last week."},
            {
                "speaker": "Bob",
                "dia_id": "D1:2",
                "text": "Lovely! What does Miso like to eat?",
                "img_url": ["x"],
                "blip_caption": "a photo of a grey cat",
            },
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Mostly salmon, and the occasional olive."},
        ],
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I started pottery classes in Lyon."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "Pottery sounds relaxing, enjoy it!"},
        ],
    },
    "qa": [
        {"question": "What is Ann's cat called?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
        {"question": "What does Miso eat?", "answer": "salmon", "evidence": ["D1:3; D2:1"], "category": 1},
        {
            "question": "When did Bob start pottery?",
            "answer": "June 2023",
            "evidence": ["D:2:01", "D9:9"],
            "category": 2,
        },
        {"question": "What is Bob's dog called?", "adversarial_answer": "Rex", "evidence": ["D2:1"], "category": 5},
    ],
}


def test_a_conversation_is_read_leniently_and_written_as_a_user_keeps_it(tmp_path):
    path = tmp_path / "conv-1.json"
    path.write_text(json.dumps(CONV))
    conv = memory.load(path)
    assert [q.evidence for q in conv.questions] == [["D1:1"], ["D1:3", "D2:1"], ["D2:1"], ["D2:1"]]
    assert conv.dropped_evidence == 1  # D9:9 names no turn
    logs = memory.chat_logs(conv)
    assert list(logs) == ["conv-1-session-01.md", "conv-1-session-02.md"]
    first = logs["conv-1-session-01.md"]
    assert first.startswith("# Session 1 — 1:56 pm on 8 May, 2023\n\nAnn: I adopted") and is_chat_log(first)
    assert "Bob: Lovely! What does Miso like to eat? [shares a photo: a photo of a grey cat]" in first
    (tmp_path / "t.jsonl").write_text(memory.transcript_jsonl(conv))
    (doc,) = list(read_any(tmp_path / "t.jsonl", 1_000_000))
    assert [(s.label, s.when) for s in parse_chat_log(doc.text)] == [
        ("session 1", "2023-05-08 13:56"),
        ("session 2", "2023-06-02 10:00"),
    ]
    chunks = [c.text for text in logs.values() for c in chunks_of(text, "conversation", IngestParams())]
    assert memory.found(["D1:1", "D1:3", "D2:1"], conv.turns, chunks[:1]) == [True, True, False]
    # what the consumer cites: the chunks that hold an evidence turn
    assert memory.found_in(["D2:1"], conv.turns, [chunks[0], *chunks[1:]])[0] is False
    assert memory.found_in(["D1:1"], conv.turns, ["no", chunks[0]]) == [False, True]


def test_the_score_per_category_and_the_adversarial_premise_apart():
    records = [
        {"category": 4, "found": [True]},
        {"category": 1, "found": [True, False]},
        {"category": 2, "found": [False]},
        {"category": 5, "found": [True]},
        {"category": 3, "found": []},  # no evidence left: not scored
    ]
    s = memory.score(records)
    assert (s["questions"], s["recall"], s["all_evidence"]) == (3, 0.5, 0.333)
    assert s["by_category"] == {"multi-hop": 0.5, "temporal": 0.0, "open-domain": 0.0, "single-hop": 1.0}
    assert (s["adversarial_premise_in_context"], s["adversarial_questions"]) == (1.0, 1)


def test_the_gold_answers_are_read_and_an_adversarial_question_has_none(tmp_path):
    (tmp_path / "conv-1.json").write_text(json.dumps(CONV))
    conv = memory.load(tmp_path / "conv-1.json")
    assert [q.answers for q in conv.questions] == [("Miso",), ("salmon",), ("June 2023",), ()]
