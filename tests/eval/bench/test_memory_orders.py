"""Orders of a conversation's chunks, replayed (eval/bench/memory_orders.py), on a real store: the replay of the
first stage is the search's own order, and a context is cut and scored as the service's."""

import json

import numpy as np
import pytest

from eval.bench import memory, memory_orders
from retrieval.corpus.ingest import ingest_paths
from retrieval.params import IngestParams, SearchParams
from retrieval.query.search import search

TOPICS = [
    ("Ann", "I adopted a grey cat named Miso from the shelter."),
    ("Bob", "Miso is a lovely name! What does she like to eat?"),
    ("Ann", "Mostly salmon, and she steals olives from the table."),
    ("Bob", "I started pottery classes in Lyon on Tuesdays."),
    ("Ann", "Pottery sounds relaxing. Did you make a bowl yet?"),
    ("Bob", "A lopsided bowl, glazed blue, for my sister Clara."),
    ("Ann", "We hiked the ridge trail to the old lighthouse on Sunday."),
    ("Bob", "How long did the lighthouse hike take you?"),
    ("Ann", "Four hours, and Miso waited at home with the neighbour."),
    ("Bob", "I am training for the Lyon half marathon in October."),
    ("Ann", "Good luck! My brother ran it in two hours flat."),
    ("Bob", "Clara says the marathon route passes the river quays."),
]
QUESTIONS = [
    ("What is Ann's cat called?", ["D1:1"], 4),
    ("What did Bob make in pottery class?", ["D1:6"], 4),
    ("Where did Ann hike on Sunday?", ["D2:1"], 4),
    ("What race is Bob training for?", ["D2:4"], 1),
    ("Who is Clara?", ["D1:6", "D2:6"], 1),
]


@pytest.fixture
def store(conn, embedder, tmp_path):
    """A two-session conversation in windows of about 20 tokens, and the replay's reading of it."""
    sessions = {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_2_date_time": "10:00 am on 2 June, 2023"}
    for s, turns in ((1, TOPICS[:6]), (2, TOPICS[6:])):
        sessions[f"session_{s}"] = [
            {"speaker": a, "dia_id": f"D{s}:{n}", "text": t} for n, (a, t) in enumerate(turns, 1)
        ]
    qa = [{"question": q, "answer": "-", "evidence": e, "category": c} for q, e, c in QUESTIONS]
    (tmp_path / "conv-1.json").write_text(
        json.dumps({"conversation": {"speaker_a": "Ann", "speaker_b": "Bob"} | sessions, "qa": qa})
    )
    conv = memory.load(tmp_path / "conv-1.json")
    folder = tmp_path / "logs"
    folder.mkdir()
    for name, text in memory.chat_logs(conv).items():
        (folder / name).write_text(text)
    ingest_paths(conn, [folder], IngestParams(conversation_window=20), SearchParams(), embedder)
    return memory_orders.read_store(conn, conv, embedder, SearchParams())


@pytest.mark.parametrize(
    "sp",
    [
        SearchParams(top_k=4),
        SearchParams(top_k=6, conversation_keyword=0.0),
        SearchParams(top_k=6, conversation_rrf_k=1, conversation_keyword=3.0),
    ],
)
def test_the_replayed_first_stage_is_the_search_s_own_order(conn, embedder, store, sp):
    assert len(store.candidates) >= 6  # more chunks than the pool: which ones enter it matters
    at = {c.chunk_id: n for n, c in enumerate(store.candidates)}
    for j, q in enumerate(store.questions):
        served = [at[c.chunk_id] for c in search(conn, embedder, q.text, sp).candidates]
        assert memory_orders.served(store, j, sp) == served


def test_a_context_is_cut_to_the_conversation_tokens_and_scored_by_containment(store):
    sp = SearchParams(conversation_tokens=60, threshold=-1.0, min_chunks=1)
    evidence_first = lambda s, j, _: sorted(range(len(s.candidates)), key=lambda i: -s.hits[j][:, i].sum())  # noqa: E731
    evidence_last = lambda s, j, _: evidence_first(s, j, _)[::-1]  # noqa: E731
    got = memory_orders.replay([store], sp, {"first": evidence_first, "last": evidence_last})
    assert got["first"]["recall"] == 1.0 and got["last"]["recall"] < 0.5
    wide = SearchParams(conversation_tokens=300, threshold=-1.0, min_chunks=1)
    for j in range(len(store.questions)):
        order = evidence_last(store, j, wide)
        took = memory_orders.context(store, j, order, wide)
        tokens = sum(store.candidates[i].tokens for i in took)
        assert took[:5] == order[:5] and len(took) > 5  # the pick (5), then the fill
        assert tokens <= 300 and took == [i for i in order if i in took]  # to the conversation's tokens, in order
    assert np.all(store.bm25 >= 0) and store.bm25.shape == store.cos.shape
