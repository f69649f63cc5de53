"""A query's first stage: HNSW cosine top-k with the optional keyword side fused by reciprocal rank, the
threshold and the budget (`search`), and the human-readable staging file of every candidate, which
parses back to what was written (`staging`)."""
