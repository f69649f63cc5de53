"""Retrieval core: chunk, scrub, embed, store (pgvector), search, staging file."""
