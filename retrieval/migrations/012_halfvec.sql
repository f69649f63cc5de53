-- Chunk vectors stored as halfvec (float16): half the bytes in the table and the HNSW index. At a million
-- vectors the halfvec index is 57 % of the vector one at the same recall@20 (`pai lab bench retrieval --storage
-- vector,halfvec`), and first-stage Recall@5 on SciFact test is unchanged (docs/measurements.md). Vectors are
-- computed in float32 and rounded once, when stored; queries are cast to halfvec to use the index.
DROP INDEX IF EXISTS chunks_embedding_hnsw;
ALTER TABLE chunks ALTER COLUMN embedding TYPE halfvec(384) USING embedding::halfvec(384);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding halfvec_cosine_ops)
    WITH (m = 16, ef_construction = 64);
