-- Feedback log (DESIGN.md contract 3): every query, its candidates, picks, use, ratings, corrections.
CREATE TABLE queries (
    id               bigserial PRIMARY KEY,
    text             text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    selector_version text NOT NULL,           -- the selector that served this query
    prompt_version   text,
    selection_status text,                    -- ok | repaired | fallback | pending
    staging_path     text,
    answer           text,                    -- the consumer's final answer, when it tells us
    rating           smallint CHECK (rating IN (-1, 1)),
    correction       text,
    updated_at       timestamptz NOT NULL DEFAULT now()  -- the pull's watermark moves on this
);
CREATE INDEX queries_updated_at ON queries (updated_at, id);

CREATE TABLE query_candidates (
    query_id     bigint NOT NULL REFERENCES queries (id) ON DELETE CASCADE,
    rank         integer NOT NULL,            -- 1-based, as shown to the selector
    chunk_id     bigint NOT NULL,             -- no FK: the log outlives re-ingestion; content_hash pins the text
    content_hash text NOT NULL,
    score        real NOT NULL,
    pick_rank    integer,                     -- position in the selector's pick, NULL if not picked
    used         boolean,                     -- NULL unknown, true used, false ignored
    PRIMARY KEY (query_id, rank)
);

CREATE TABLE learned_qa (
    id              bigserial PRIMARY KEY,
    question        text NOT NULL UNIQUE,
    answer          text NOT NULL,
    quality_score   integer NOT NULL DEFAULT 1,  -- grows with each thumbs-up
    source_query_id bigint REFERENCES queries (id) ON DELETE SET NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX learned_qa_question_trgm ON learned_qa USING gin (question gin_trgm_ops);
