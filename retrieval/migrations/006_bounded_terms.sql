-- A chunk's full-text side is built from at most its first 100,000 characters: past about 1 MB a
-- tsvector cannot be built at all ("string is too long for tsvector"), and one such chunk used to
-- fail its whole document. Chunking keeps chunks far below this; it is the floor under it.
CREATE OR REPLACE FUNCTION chunk_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_terms (chunk_id, tsv)
    VALUES (NEW.id, to_tsvector('english', left(coalesce(NEW.heading, '') || ' ' || NEW.text, 100000)))
    ON CONFLICT (chunk_id) DO UPDATE SET tsv = EXCLUDED.tsv;
    RETURN NEW;
END $$;
