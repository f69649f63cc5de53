-- Trials by interleaving (retrieval/logs/trials.py): a challenger that passed the checks needing no user
-- labels is served beside the champion on a share of queries, the two rankings merged by team-draft; the
-- consumer's citations credit each team, and a sequential rule promotes or rejects it. The trial's state is
-- its row and the log: every service on the store reads the same tallies, and a restart resumes them.
CREATE TABLE selector_trials (
    id                bigserial PRIMARY KEY,
    champion          text NOT NULL,            -- the version the challenger is compared with
    champion_record   jsonb NOT NULL,
    challenger        text NOT NULL,
    challenger_record jsonb NOT NULL,           -- what the services load for the challenger's team
    share             real NOT NULL CHECK (share > 0 AND share <= 1),  -- of queries served interleaved
    rule              jsonb NOT NULL,           -- the stopping rule, fixed at the start (pre-registered)
    status            text NOT NULL DEFAULT 'running'
                      CHECK (status IN ('running', 'promoted', 'rejected', 'stopped')),
    reason            text,                     -- the verdict, or why it was stopped
    evidence          jsonb,                    -- the tallies and statistics at the decision
    deployment_id     bigint REFERENCES selector_deployments (id),  -- the promotion it announced
    recorded          boolean NOT NULL DEFAULT false,  -- the decision is written to the MLflow registry
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    decided_at        timestamptz
);
-- One trial at a time: a new one stops the running one in the same transaction.
CREATE UNIQUE INDEX selector_trials_one_running ON selector_trials ((true)) WHERE status = 'running';

-- The trial a query was served in (NULL: the champion alone), and of each shown candidate whose context of the
-- same size would have held it: the champion's alone, the challenger's alone (these two earn credit), or both.
ALTER TABLE queries ADD COLUMN trial_id bigint;
ALTER TABLE query_candidates ADD COLUMN team text CHECK (team IN ('champion', 'challenger', 'both'));
CREATE INDEX queries_trial ON queries (trial_id) WHERE trial_id IS NOT NULL;
