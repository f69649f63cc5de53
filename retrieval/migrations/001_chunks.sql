-- Documents (one per file, or per record of a JSONL corpus) and their chunks.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE documents (
    id           bigserial PRIMARY KEY,
    source       text NOT NULL UNIQUE,          -- file path, or "path#record-id" for corpus records
    path         text NOT NULL,                 -- the file it came from (deletion is tracked per file)
    content_hash text NOT NULL,                 -- sha256 of the raw text: unchanged file => no writes
    n_chunks     integer NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_path ON documents (path);

CREATE TABLE chunks (
    id             bigserial PRIMARY KEY,
    document_id    bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    source         text NOT NULL,
    ord            integer NOT NULL,            -- position within the document
    heading        text,
    parent_heading text,
    level          smallint NOT NULL DEFAULT 0, -- heading level, 0 when the chunk has none
    start_line     integer NOT NULL,
    end_line       integer NOT NULL,
    text           text NOT NULL,               -- already scrubbed of secrets
    content_hash   text NOT NULL,               -- sha256 of heading path + text
    tokens         integer NOT NULL,            -- approximate tokens (chars / 4)
    embedding      vector(384) NOT NULL,        -- all-MiniLM-L6-v2, L2-normalised
    near_chunk_id  bigint REFERENCES chunks (id) ON DELETE SET NULL,
    near_score     real,
    tsv            tsvector GENERATED ALWAYS AS
                   (to_tsvector('english', coalesce(heading, '') || ' ' || text)) STORED,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (document_id, content_hash)
);
CREATE INDEX chunks_document ON chunks (document_id);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);
CREATE INDEX chunks_trgm ON chunks USING gin (text gin_trgm_ops);
-- The HNSW index is (re)built by retrieval.corpus.store.ensure_hnsw from params.yaml (m, ef_construction).
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
