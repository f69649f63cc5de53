-- Previews (issue 55): after the context, the next candidates are listed to the consumer as one-line previews; it may
-- read one whole (`expand`). A preview it expanded, or one it cited, is an exposure with a label below the cut.
ALTER TABLE query_candidates
    ADD COLUMN previewed          boolean,                        -- listed as a preview; NULL: logged before previews
    ADD COLUMN preview_propensity real,                           -- P(previewed) under the serving policy
    ADD COLUMN expanded           boolean NOT NULL DEFAULT false; -- the consumer read it whole (`expand`)
