-- The hot-swap protocol (DESIGN.md): which selector version the service must run, and what each
-- service did about it. A deployment row is announced with NOTIFY pai_selector; services answer
-- with an apply row (ok, or why the canary failed) and the announce -> serving latency.
CREATE TABLE selector_deployments (
    id          bigserial PRIMARY KEY,
    version     text NOT NULL,
    record      jsonb NOT NULL,          -- the version record: kind, GGUF path + sha256, Ollama tag, prompt format
    action      text NOT NULL CHECK (action IN ('promote', 'rollback', 'revert', 'deploy')),
    reason      text,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE selector_applies (
    id             bigserial PRIMARY KEY,
    deployment_id  bigint NOT NULL REFERENCES selector_deployments (id),
    service        text NOT NULL,        -- host:pid of the service that applied it
    ok             boolean NOT NULL,
    detail         text,                 -- canary figures, or why the old selector was kept
    swap_ms        double precision,     -- announce -> serving (database clock)
    applied_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX selector_applies_deployment ON selector_applies (deployment_id);

-- The selector version whose background pick was recorded (selector_version served the answer).
ALTER TABLE queries ADD COLUMN picked_by text;
