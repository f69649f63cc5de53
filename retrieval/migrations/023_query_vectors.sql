-- Each logged query's embedding, so the service can find the past questions like a new one and what their
-- answers cited (the learned ranker's `recalled` feature: retrieval/contracts/recalled.py). Stored as halfvec,
-- like the chunks'. NULL where the scrubber changed the query's text (the vector of the text before scrubbing
-- would be a copy of the secret) and for queries logged before this migration: neither is read.
ALTER TABLE queries ADD COLUMN embedding halfvec(384);
CREATE INDEX queries_embedding_hnsw ON queries USING hnsw (embedding halfvec_cosine_ops)
    WITH (m = 16, ef_construction = 64);
