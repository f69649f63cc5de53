-- The full-text side in a narrow table of its own. As a column of `chunks` the tsvector sat beside
-- the text and the 1.5 kB embedding, was TOASTed, and ranking a common OR-query read ~200 MB
-- (40 ms on 18K chunks); here it is read inline.
CREATE TABLE chunk_terms (
    chunk_id bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    tsv      tsvector NOT NULL
);
INSERT INTO chunk_terms (chunk_id, tsv) SELECT id, tsv FROM chunks;
CREATE INDEX chunk_terms_tsv ON chunk_terms USING gin (tsv);

CREATE FUNCTION chunk_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_terms (chunk_id, tsv)
    VALUES (NEW.id, to_tsvector('english', coalesce(NEW.heading, '') || ' ' || NEW.text))
    ON CONFLICT (chunk_id) DO UPDATE SET tsv = EXCLUDED.tsv;
    RETURN NEW;
END $$;
CREATE TRIGGER chunks_terms_sync AFTER INSERT OR UPDATE OF heading, text ON chunks
    FOR EACH ROW EXECUTE FUNCTION chunk_terms_sync();

ALTER TABLE chunks DROP COLUMN tsv;
