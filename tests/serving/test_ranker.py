"""The learned ranker selector (the champion) on a ranker folder as train_ranker writes one: given the store's
vectors it embeds nothing, and its similarity is the store's cosine, nested headings included; without them
(evaluate's path) it embeds the very same passage text."""

import numpy as np
import pytest

from retrieval.query.search import Candidate
from serving.picker import Picker
from serving.ranker import RankerSelector


def test_a_ranker_given_stored_vectors_embeds_nothing(tmp_path, embedder, make_ranker):
    ranker = RankerSelector(make_ranker(tmp_path / "r", {"similarity": 1.0}), "ranker:t")
    texts = ["Bees make honey from nectar.", "Rivers flow to the sea.", "Compilers emit machine code."]
    vecs = embedder.encode_passages(texts)
    q = embedder.encode(["how is honey made?"])[0]
    with_vecs = [
        Candidate(r, r, f"/{r}.md", None, None, 1, 1, t, "h", float(vecs[r - 1] @ q), 5, vector=vecs[r - 1])
        for r, t in enumerate(texts, start=1)
    ]
    picker = Picker(ranker)
    try:
        s = picker.serve("how is honey made?", with_vecs[::-1], q)
        assert s.chosen[0].chunk_id == 1 and picker.embedded() == {"queries": 0, "candidates": 0}
        bare = [Candidate(c.rank, c.chunk_id, c.source, None, None, 1, 1, c.text, "h", c.score, 5) for c in with_vecs]
        assert picker.serve("how is honey made?", bare).chosen[0].chunk_id == 1  # eval's path: it embeds
        assert picker.embedded() == {"queries": 1, "candidates": 3}
    finally:
        picker.close()


NESTED = """# Deployment

Intro to deploying the service.

## Rollback

To roll back a bad release, move the champion alias to the previous version; the service follows it.

## Canary

Every new selector answers three known prompts before it serves.
"""


def test_the_rankers_similarity_is_the_stores_cosine_for_a_nested_heading_chunk(conn, embedder, tmp_path, make_ranker):
    """One passage text (`passage_text`): ingest embeds `parent / heading` + text and stores it; the service
    hands that vector to the ranker, and the eval path (no stored vector) embeds the very same text."""
    from retrieval.contracts.passage import passage_text
    from retrieval.contracts.selection import PromptCandidate
    from retrieval.corpus.ingest import ingest_documents
    from retrieval.corpus.sources import Document
    from retrieval.params import IngestParams, SearchParams
    from retrieval.query.search import search_vector

    ingest_documents(
        conn, [Document("notes/deploy.md", "notes", NESTED, "markdown")], IngestParams(), SearchParams(), embedder
    )
    query = "how do I roll back a release?"
    q = embedder.encode([query])[0]
    result = search_vector(conn, query, q, SearchParams(threshold=0.0))
    nested = next(c for c in result.candidates if c.heading == "Rollback")
    assert nested.parent_heading == "Deployment" and nested.vector is not None
    ranker = RankerSelector(make_ranker(tmp_path / "r", {"similarity": 1.0}), "ranker:t")
    shown = [PromptCandidate(c.source, c.heading, c.text, c.parent_heading, c.vector) for c in result.candidates]
    qv, vecs = ranker.vectors(query, shown, q)
    assert np.allclose(vecs @ qv, [c.score for c in result.candidates], atol=1e-5)  # the store's cosine
    assert ranker.embedded == {}
    bare = [PromptCandidate(c.source, c.heading, c.text, c.parent_heading) for c in result.candidates]
    _, embedded = ranker.vectors(query, bare, q)
    # the store keeps halfvec (float16): a fresh float32 vector of the same text is within its rounding
    assert np.allclose(embedded, vecs, atol=2e-4) and ranker.embedded["candidates"] == len(bare)
    i = [c.chunk_id for c in result.candidates].index(nested.chunk_id)
    assert passage_text(nested.heading, nested.text, nested.parent_heading) == nested.text  # its own "## Rollback"
    assert passage_text("Rollback", "To roll back ...", "Deployment") == "Deployment / Rollback\nTo roll back ..."
    assert passage_text(None, "x", None) == "x" and passage_text("H", "# H\nx") == "# H\nx"
    assert float(embedded[i] @ q) == pytest.approx(nested.score, abs=1e-3)
