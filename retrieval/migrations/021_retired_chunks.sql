-- A document's chunks that a newer version of it replaced (a changed file ingested again, a correction on the
-- page, a re-scrub): the query log and the staging files still name them by id, so forgetting the document must
-- forget them too. The rows go with their document.
CREATE TABLE retired_chunks (
    document_id bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    chunk_id    bigint NOT NULL,
    retired_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, chunk_id)
);
