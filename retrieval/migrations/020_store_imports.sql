-- `pai import` (issue 57, item 4): each archive loaded into this store, and the store it came from. The store keeps
-- its own identity (store_identity); this is where the origin's is recorded.
CREATE TABLE store_imports (
    id                 bigserial PRIMARY KEY,
    origin_store_id    uuid NOT NULL,
    archive_created_at timestamptz NOT NULL,  -- the moment of the archive's snapshot
    format_version     integer NOT NULL,
    pai_version        text,
    tables             jsonb NOT NULL,        -- table -> rows loaded
    imported_at        timestamptz NOT NULL DEFAULT now()
);
