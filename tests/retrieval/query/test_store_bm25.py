"""BM25 with the store's word statistics, on real Postgres: against BM25 computed by hand from Postgres' own
lexemes, scoped, and with hostile queries."""

import math

import pytest

from retrieval.corpus.ingest import ingest_paths
from retrieval.params import IngestParams, SearchParams
from retrieval.query.store_bm25 import K1, B, store_bm25

NOTES = {
    "a.md": "Ann keeps bees. Ann sells honey at the market on Sunday.",
    "b.md": "Ann and Bob talk about the weather and the weather again.",
    "c.md": "Bob restores an old lighthouse on the ridge; Ann visits the lighthouse.",
    "d.md": "Ann says hello. Bob says hello. Ann says goodbye.",
}


def _lexemes(conn, text: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT lexeme, coalesce(array_length(positions, 1), 1) FROM unnest(to_tsvector('english', %s))", (text,)
    )
    return dict(rows.fetchall())


def _by_hand(conn, query: str, ids: list[int], all_ids: list[int]) -> dict[int, float]:
    docs = {
        i: dict(
            conn.execute(
                "SELECT lexeme, coalesce(array_length(positions, 1), 1) FROM chunk_terms, "
                "unnest(tsv) WHERE chunk_id = %s",
                (i,),
            ).fetchall()
        )
        for i in all_ids
    }
    n, mean = len(all_ids), sum(max(len(docs[i]), 1) for i in ids) / len(ids)
    out = {}
    for i in ids:
        s = 0.0
        for w in _lexemes(conn, query):
            df = sum(w in docs[j] for j in all_ids)
            tf = docs[i].get(w, 0)
            if df and tf:
                s += (
                    math.log(1 + (n - df + 0.5) / (df + 0.5))
                    * tf
                    * (K1 + 1)
                    / (tf + K1 * (1 - B + B * max(len(docs[i]), 1) / mean))
                )
        if s > 0:
            out[i] = s
    return out


@pytest.fixture
def store(conn, embedder, tmp_path):
    for name, text in NOTES.items():
        (tmp_path / name).write_text(text + "\n")
    ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)
    return [i for (i,) in conn.execute("SELECT id FROM chunks ORDER BY id")]


def test_scores_are_bm25_with_the_store_s_idf_over_the_candidates(conn, store):
    q = "Did Ann visit the lighthouse or sell honey?"
    got = store_bm25(conn, q, store[:3], scopes=["default"])  # a scope's chunks are counted exactly
    want = _by_hand(conn, q, store[:3], store)
    assert got.keys() == want.keys() and len(got) == 3
    assert all(math.isclose(got[i], want[i], rel_tol=1e-9) for i in got)
    # "ann" is in every chunk: it weighs least; the rare words decide
    assert sorted(got, key=got.get, reverse=True) == [store[2], store[0], store[1]]
    assert store_bm25(conn, q, store[:3]) == pytest.approx(got)  # the whole store, before the planner counted it


def test_a_stale_planner_count_of_the_whole_store_still_ranks(conn, embedder, tmp_path):
    (tmp_path / "a.md").write_text("Ann keeps bees and sells honey.\n")
    ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)
    conn.execute("ANALYZE chunk_terms")  # the planner counts 1 chunk
    for n, text in enumerate(["Honey again, honey always.", "Bees make honey.", "The lighthouse keeper."]):
        (tmp_path / f"b{n}.md").write_text(text + "\n")
    ingest_paths(conn, [tmp_path], IngestParams(), SearchParams(), embedder)
    ids = [i for (i,) in conn.execute("SELECT id FROM chunks ORDER BY id")]
    stale, exact = store_bm25(conn, "honey bees", ids), store_bm25(conn, "honey bees", ids, scopes=["default"])
    assert set(stale) == set(exact) and all(math.isfinite(v) and v > 0 for v in stale.values())  # df > n: no error
    assert sorted(stale, key=stale.get) == sorted(exact, key=exact.get)


def test_a_scope_s_statistics_read_only_its_own_chunks(conn, store):
    conn.execute("UPDATE chunk_terms SET scope = 'other' WHERE chunk_id = ANY(%s)", (store[2:],))
    q = "lighthouse honey"
    mine = store_bm25(conn, q, store[:2], scopes=["default"])
    assert mine == pytest.approx(_by_hand(conn, q, store[:2], store[:2]))
    assert mine != pytest.approx(store_bm25(conn, q, store[:2]))  # the whole store's idf differs


HOSTILE = [
    "",
    "   ",
    "the and of",
    "it's 'quoted' \\ & | ! :* <-> (",
    "honey " * 20_000,
    r"C:\Users\ann\honey.txt",
    r"http://x.com/a\b?honey=1&bees=2",
    r"a\b@x.com and honey",
    "o'neil's honey",
    "naïve café — 東京 honey 💥",
    "-1e10 0x1F honey:* & !bees",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_or_empty_queries_score_without_error(conn, store, query):
    got = store_bm25(conn, query, store)
    assert all(s > 0 for s in got.values()) and set(got) <= set(store)
    assert bool(got) == ("honey" in query)  # stop words and operators match nothing
    assert store_bm25(conn, "honey", []) == {}
