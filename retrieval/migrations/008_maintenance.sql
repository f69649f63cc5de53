-- Maintenance (`pai maintain`, and `pai serve` on a schedule).

-- The usage prior: a bounded weight per chunk from the feedback log (used => up, shown and never
-- used => down), recomputed from the log by each run. A table of its own, not a column of `chunks`:
-- updating a chunks row writes a new tuple and a new HNSW entry for its embedding.
CREATE TABLE chunk_usage (
    chunk_id   bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    used       integer NOT NULL,        -- times a consumer used it
    ignored    integer NOT NULL,        -- times it was shown (at/above threshold) and not used
    weight     real NOT NULL,           -- in [-maintain.usage_bound, +maintain.usage_bound]
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A document replaced by a newer one (a captured fact restated, a note rewritten under a new name):
-- maintenance deletes it. ON DELETE SET NULL: if the newer one goes, the older one is current again.
ALTER TABLE documents ADD COLUMN superseded_by bigint REFERENCES documents (id) ON DELETE SET NULL;
CREATE INDEX documents_superseded_by ON documents (superseded_by) WHERE superseded_by IS NOT NULL;

-- Each recall check of the HNSW index: the next one runs when the chunk count has grown enough.
CREATE TABLE index_checks (
    id          bigserial PRIMARY KEY,
    checked_at  timestamptz NOT NULL DEFAULT now(),
    chunks      bigint NOT NULL,         -- chunk count at the check
    ef_search   integer NOT NULL,
    k           integer NOT NULL,
    queries     integer NOT NULL,
    recall      real NOT NULL            -- HNSW top-k vs the exact top-k
);

-- One row per maintenance run (a dry run writes nothing): what it found and what it did.
CREATE TABLE maintenance_runs (
    id          bigserial PRIMARY KEY,
    finished_at timestamptz NOT NULL DEFAULT now(),
    seconds     real NOT NULL,
    report      jsonb NOT NULL
);
