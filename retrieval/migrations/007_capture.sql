-- Capture (issue 16): exchanges posted to /capture or `pai capture`, what became of each, the facts
-- they left in the store, and the adaptive noise gate (a ring buffer of rejections and the
-- prototypes learned from it).

-- One exchange. Its texts are scrubbed of secrets before they are written here (intake).
CREATE TABLE captures (
    id             bigserial PRIMARY KEY,
    source         text,                         -- who sent it (a client name), optional
    session        text,                         -- the conversation it came from, optional
    user_text      text NOT NULL,
    assistant_text text NOT NULL,
    redactions     jsonb NOT NULL DEFAULT '{}',  -- kind -> secrets replaced at intake
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'stored', 'duplicate', 'rejected', 'failed')),
    gate           text,                         -- what decided: prefilter | length | noise | quality | store
    decided_by     text,                         -- rules | noise | llm:<model>
    reason         text,
    noise_score    real,                         -- max cosine to a noise prototype; NULL before any exist
    fact_ids       bigint[] NOT NULL DEFAULT '{}',   -- chunks stored for its facts
    duplicate_of   bigint[] NOT NULL DEFAULT '{}',   -- chunks its duplicate facts were skipped for
    linked         integer NOT NULL DEFAULT 0,   -- facts stored with a near link
    seconds        real,
    created_at     timestamptz NOT NULL DEFAULT now(),
    processed_at   timestamptz
);
CREATE INDEX captures_pending ON captures (id) WHERE status = 'pending';

-- Facts are documents of their own: kind 'fact' and the exchange they came from.
ALTER TABLE documents ADD COLUMN kind text NOT NULL DEFAULT 'document';
ALTER TABLE documents ADD COLUMN capture_id bigint REFERENCES captures (id) ON DELETE SET NULL;

-- The last N rejections (any gate), slot = rejection number mod N. The embedding is filled in at
-- the next rebuild when the gate that rejected had none (the pre-filter and length gates embed nothing).
CREATE TABLE capture_noise_buffer (
    slot       integer PRIMARY KEY,
    capture_id bigint,
    gate       text NOT NULL,
    text       text NOT NULL,
    embedding  vector(384),
    added_at   timestamptz NOT NULL DEFAULT now()
);

-- The one row of noise-gate state: the rejection counter and the prototypes, replaced together by
-- one UPDATE (readers see the old set or the new one, never a mix).
CREATE TABLE capture_noise (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    rejections bigint NOT NULL DEFAULT 0,
    version    integer NOT NULL DEFAULT 0,       -- 0: no prototypes yet (cold start: the gate passes all)
    built_at   timestamptz,
    centroids  bytea,                            -- float32 (k, 384), L2-normalised
    examples   jsonb NOT NULL DEFAULT '[]'       -- per prototype: {"size", "texts": [nearest buffer texts]}
);
INSERT INTO capture_noise DEFAULT VALUES;
