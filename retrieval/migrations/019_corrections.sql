-- The web page (/ui, issue 58). A document corrected there keeps each version it replaced, dated: the text its
-- chunks held, when that version was written and when the next one superseded it. The store serves only the
-- newest (the document's own chunks); a version's row goes with its document (a forget forgets every version).
CREATE TABLE document_versions (
    id            bigserial PRIMARY KEY,
    document_id   bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    text          text NOT NULL,                      -- the superseded version, as its chunks held it (scrubbed)
    written_at    timestamptz NOT NULL,               -- when the superseded version was written
    superseded_at timestamptz NOT NULL DEFAULT now(), -- when the correction replaced it
    reason        text NOT NULL
);
CREATE INDEX document_versions_document ON document_versions (document_id, id);

-- A person's label on one candidate of one query (the page's +1/-1): `used` is the label the loop reads;
-- `rated_at` says a person set it, and when.
ALTER TABLE query_candidates ADD COLUMN rated_at timestamptz;  -- a chunk's history reads query_candidates_chunk (018)

-- Ingest runs, one row each (the page's health: the last ingests and their errors; redaction counts, never text).
CREATE TABLE ingest_runs (
    id          bigserial PRIMARY KEY,
    finished_at timestamptz NOT NULL DEFAULT now(),
    door        text NOT NULL,                   -- cli | http | ui
    scope       text NOT NULL,
    documents   integer NOT NULL,                -- changed documents written
    chunks      integer NOT NULL,                -- chunks inserted
    errors      jsonb NOT NULL DEFAULT '[]',     -- one line each (at most 20 kept)
    redactions  jsonb NOT NULL DEFAULT '{}'      -- kind -> secrets replaced
);
CREATE INDEX ingest_runs_scope ON ingest_runs (scope, id);
