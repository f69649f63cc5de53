-- Each trial query's outcome as the trial's rule reads it (retrieval/logs/trials.py), kept beside the log: a
-- settle after each feedback reads one small row per query instead of every trial query's candidates and texts
-- again (which grew with the trial: the feedback of its 3,000th query waited ~0.5 s). A query's outcome is read
-- from its record once, and again whenever its updated_at moves (its feedback, a rating, a forget's rewrite).
-- Derived data: deleting a row only makes the next settle read that query again.
CREATE TABLE trial_outcomes (
    query_id bigint PRIMARY KEY REFERENCES queries (id) ON DELETE CASCADE,
    trial_id bigint NOT NULL,
    seen_at  timestamptz NOT NULL,  -- the query's updated_at when its outcome was read
    kind     text NOT NULL CHECK (kind IN ('win', 'loss', 'tie', 'same', 'none'))
    -- win / loss / tie: cited, a side's own chunk shown; same: cited, nothing one side alone would serve (not
    -- judged); none: nothing shown or previewed cited (not counted)
);
CREATE INDEX trial_outcomes_trial ON trial_outcomes (trial_id);
