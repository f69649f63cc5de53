"""Search against real Postgres + pgvector with real embeddings, and its pure parts with literals."""

from pathlib import Path

import numpy as np

from retrieval.corpus.ingest import ingest_paths
from retrieval.dialogue import conversation_order
from retrieval.fusion import general_order
from retrieval.params import IngestParams, SearchParams
from retrieval.query.order import rrf
from retrieval.query.search import Candidate, kept, keyword_rankings, newer_than, search, take_budget
from retrieval.query.store_bm25 import store_bm25

DOCS = {
    "rivers.txt": "Rivers carry fresh water from mountains down to the sea, shaping valleys over millennia.",
    "compilers.txt": "A compiler parses source code into a syntax tree and emits machine instructions.",
    "bees.txt": "Honey bees collect nectar from flowers and store it as honey in wax combs.",
    "postgres.txt": "PostgreSQL stores rows in heap pages; indexes such as B-trees speed up lookups.",
    "part.txt": "Order replacement part XJ-9000 when the gasket wears out.",
}


def corpus(conn, embedder, tmp_path):
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text + "\n")
    ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)


def test_vector_search_ranks_the_matching_document_first(conn, embedder, tmp_path):
    corpus(conn, embedder, tmp_path)
    r = search(conn, embedder, "how do bees make honey?", SearchParams(hybrid=False))
    assert Path(r.candidates[0].source).name == "bees.txt"
    assert [c.rank for c in r.candidates] == list(range(1, 6))
    assert r.candidates[0].vector_rank == 1 and r.candidates[0].keyword_rank is None
    scores = [c.score for c in r.candidates]
    assert scores == sorted(scores, reverse=True)  # vector-only: fused order is cosine order


def test_hybrid_brings_keyword_matches_and_marks_them(conn, embedder, tmp_path):
    corpus(conn, embedder, tmp_path)
    r = search(conn, embedder, "XJ-9000", SearchParams(top_k=2))
    top = r.candidates[0]
    assert Path(top.source).name == "part.txt" and top.keyword_rank == 1
    for kw in ("trgm", "both"):
        r = search(conn, embedder, "gasket XJ-9000", SearchParams(top_k=2, keyword=kw))
        assert Path(r.candidates[0].source).name == "part.txt"


def test_threshold_trims_the_tail_but_never_cuts_the_context_below_the_floor(conn, embedder, tmp_path):
    corpus(conn, embedder, tmp_path)
    r = search(conn, embedder, "how do bees make honey?", SearchParams(threshold=0.3, min_chunks=1))
    assert len(r.above) >= 1 and r.below_threshold == 5 - len(r.above) and r.below_threshold > 0
    assert all(c.score >= 0.3 for c in r.above)
    assert r.context == r.above[: len(r.context)] and len(r.context) >= 1
    # one candidate clears the threshold, the floor is 3: the best-fused two below it top the context up
    strict = SearchParams(threshold=r.candidates[0].score - 1e-6, min_chunks=3)
    r = search(conn, embedder, "how do bees make honey?", strict)
    assert [c.rank for c in r.above] == [1, 2, 3] and r.below_threshold == 2 and len(r.context) == 3
    assert sum(c.score >= strict.threshold for c in r.context) == 1
    # nothing clears it: still the floor's three, in fused order
    r = search(conn, embedder, "how do bees make honey?", SearchParams(threshold=1.0, min_chunks=3))
    assert [c.rank for c in r.context] == [1, 2, 3]


def test_kept_keeps_fused_order_and_never_adds_beyond_the_candidates():
    cs = [Candidate(i, i, "s", None, None, 1, 1, "t", "h", s, 8) for i, s in enumerate((0.1, 0.5, 0.05, 0.4), 1)]
    assert [c.rank for c in kept(cs, 0.3, 0)] == [2, 4]
    assert [c.rank for c in kept(cs, 0.3, 3)] == [1, 2, 4]  # the best-fused one below tops it up, in place
    assert [c.rank for c in kept(cs, 0.9, 9)] == [1, 2, 3, 4]  # fewer candidates than the floor: all of them
    assert kept([], 0.3, 3) == []


def test_take_budget_floor_and_cut():
    cs = [Candidate(i, i, "s", None, None, 1, 1, "t", "h", 1.0, 8) for i in range(1, 5)]
    assert [c.rank for c in take_budget(cs, 10, 3)] == [1, 2, 3]  # floor beats the budget
    assert [c.rank for c in take_budget(cs, 20, 0)] == [1, 2]  # budget cuts without a floor
    assert [c.rank for c in take_budget(cs, 100, 3)] == [1, 2, 3, 4]
    assert take_budget(cs[:2], 1, 3) == cs[:2]  # fewer than the floor: all of them


def test_newer_than_marks_the_later_of_two_near_linked_candidates_either_way():
    def c(rank, chunk_id, date, near=None):
        return Candidate(rank, chunk_id, "s", None, None, 1, 1, "t", "h", 1.0, 8, date=date, near_chunk_id=near)

    d3, d10 = "2026-10-03T09:00:00+00:00", "2026-10-10T09:00:00+00:00"
    cs = [
        c(1, 11, d3, near=12),  # linked to a newer one: the link's direction does not matter
        c(2, 12, d10),
        c(3, 13, d10, near=11),
        c(4, 14, d3, near=99),  # its near chunk is not among them
        c(5, 15, d10, near=16),
        c(6, 16, "2026-10-10T11:00:00+02:00"),  # the same instant: neither is newer
    ]
    assert newer_than(cs) == {2: [1], 3: [1]}
    assert newer_than([cs[0], cs[3]]) == {}


def test_rrf_fuses_by_reciprocal_rank():
    assert rrf([[1, 2, 3], [3, 4]], k=60) == [3, 1, 2, 4]
    assert rrf([[5, 6]], k=1) == [5, 6]


def test_general_fusion_orders_the_fused_candidates_by_the_general_rule(conn, embedder, tmp_path):
    corpus(conn, embedder, tmp_path)
    for q in ("gasket XJ-9000", "where does fresh water come from", "parses source code into a syntax tree"):
        g = search(conn, embedder, q, SearchParams())
        r = search(conn, embedder, q, SearchParams(fusion="rrf"))
        assert {c.chunk_id for c in g.candidates} == {c.chunk_id for c in r.candidates}  # which: RRF's top_k
        texts = [f"{c.parent_heading or ''} {c.heading or ''} {c.text}" for c in r.candidates]
        order = general_order(q, np.array([c.score for c in r.candidates]), texts)
        assert [c.chunk_id for c in g.candidates] == [r.candidates[i].chunk_id for i in order]
        assert [c.rank for c in g.candidates] == list(range(1, len(g.candidates) + 1))
    assert Path(search(conn, embedder, "gasket XJ-9000", SearchParams()).candidates[0].source).name == "part.txt"


CHAT = """# Session 1 — 2023-05-08 13:56

Ann: I adopted a greyhound called Biscuit from the shelter last week.

Bob: Lovely! How is Biscuit settling in?

Ann: Biscuit sleeps all day and sprints at dusk, a typical greyhound.

# Session 2 — 2023-06-01 09:00

Bob: My pottery class made bowls; mine cracked in the kiln.

Ann: Kilns are brutal. Did you glaze it first?

Bob: Yes, a blue glaze. Next term we try teapots.

# Session 3 — 2023-07-10 18:30

Ann: We hiked the ridge trail to the lighthouse on Sunday.

Bob: The lighthouse trail? How long did the hike take?

Ann: Four hours, and Biscuit came along the whole way.
"""


def test_a_conversation_s_candidates_are_ordered_with_the_keyword_side_notes_never(conn, embedder, tmp_path):
    corpus(conn, embedder, tmp_path)
    (tmp_path / "chat.md").write_text(CHAT)
    ingest_paths(conn, [tmp_path], IngestParams(conversation_window=20), SearchParams(), embedder)
    q = "what did Ann say about Biscuit the greyhound?"
    general = search(conn, embedder, q, SearchParams(conversation_keyword=0.0)).candidates
    assert general[0].text.startswith("[2023-")  # led by a conversation's chunk
    ordered = search(conn, embedder, q, SearchParams(conversation_keyword=3.0, conversation_rrf_k=1)).candidates
    krank = {c.chunk_id: c.keyword_rank for c in general if c.keyword_rank}
    expect = conversation_order([c.chunk_id for c in general], krank, 3.0, 1)
    assert expect != [c.chunk_id for c in general]  # the keyword side moved something
    assert [c.chunk_id for c in ordered] == expect and [c.rank for c in ordered] == list(range(1, len(ordered) + 1))
    notes = "parses source code into a syntax tree"  # led by a note: the general order, whatever the weight
    assert [c.chunk_id for c in search(conn, embedder, notes, SearchParams(conversation_keyword=3.0)).candidates] == [
        c.chunk_id for c in search(conn, embedder, notes, SearchParams(conversation_keyword=0.0)).candidates
    ]


def test_the_bm25_keyword_side_re_ranks_full_text_s_hits_by_the_store_s_word_statistics(conn, embedder, tmp_path):
    corpus(conn, embedder, tmp_path)
    q = "which part wears out: the gasket of the XJ-9000?"
    (fts,) = keyword_rankings(conn, q, SearchParams(keyword="fts", top_k=4))  # 2 x top_k
    (bm25,) = keyword_rankings(conn, q, SearchParams(keyword="bm25", top_k=2))
    scores = store_bm25(conn, q, fts)
    assert bm25 == sorted(scores, key=lambda i: (-scores[i], i))[:2] and set(bm25) <= set(fts)
    r = search(conn, embedder, q, SearchParams(keyword="bm25", top_k=3))
    assert Path(r.candidates[0].source).name == "part.txt" and r.candidates[0].keyword_rank == 1
    assert keyword_rankings(conn, "the of and", SearchParams(keyword="bm25")) == [[]]  # stop words: no hit
    assert keyword_rankings(conn, q, SearchParams(keyword="bm25"), scopes=["nobody"]) == [[]]
