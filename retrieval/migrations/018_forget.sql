-- Forget and expiry (issue 57, items 2 and 3). A document may carry an expiry: past it, search skips it at once and
-- maintenance forgets it. A forget runs in two parts: the database's rows in one transaction, which also writes its
-- journal row; then the files outside the database (staging, the pulled feedback, training data, DVC's cache, MLflow's
-- artifacts, the vector cache), which a crash can interrupt: the journal row says what is left, and the next forget or
-- maintenance run resumes it. Its `job` holds what the files must lose until it is done; then only the forgotten
-- chunks' ids (no text), by which a query logged just after its forget is found and swept.
ALTER TABLE documents ADD COLUMN expires_at timestamptz;
CREATE INDEX documents_expires_at ON documents (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE forget_journal (
    id          bigserial PRIMARY KEY,
    asked       text NOT NULL,                -- what was asked, as one line without the forgotten text itself
    state       text NOT NULL DEFAULT 'files' CHECK (state IN ('files', 'done')),
    job         jsonb NOT NULL,               -- chunk ids, query ids, texts and cache keys the files must lose
    report      jsonb,                        -- the counts, when done
    first_seen  timestamptz,                  -- the first logged query that showed it: training data since held it
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at timestamptz
);
CREATE INDEX forget_journal_open ON forget_journal (id) WHERE state <> 'done';
-- A forget finds the logged queries that listed a chunk by its id.
CREATE INDEX query_candidates_chunk ON query_candidates (chunk_id);
