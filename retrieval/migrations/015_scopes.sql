-- Scopes (retrieval/scopes.py): every document, chunk, query (its candidates and feedback hang off it), learned
-- answer and capture belongs to one, a name like 'alice/project'. Rows stored before take the scope 'default'.
-- A chunk carries its document's scope (and chunk_terms its chunk's), so both sides of a search filter on the
-- narrow row they already read; the HNSW side scans iteratively until the filtered top-k is full (pgvector 0.8).
ALTER TABLE documents ADD COLUMN scope text NOT NULL DEFAULT 'default';
ALTER TABLE chunks ADD COLUMN scope text NOT NULL DEFAULT 'default';
ALTER TABLE chunk_terms ADD COLUMN scope text NOT NULL DEFAULT 'default';
ALTER TABLE queries ADD COLUMN scope text NOT NULL DEFAULT 'default';
ALTER TABLE learned_qa ADD COLUMN scope text NOT NULL DEFAULT 'default';
ALTER TABLE captures ADD COLUMN scope text NOT NULL DEFAULT 'default';

-- A source names one document per scope (two scopes may each hold a 'notes.md'); a learned answer, one per question
-- per scope.
ALTER TABLE documents DROP CONSTRAINT documents_source_key;
CREATE UNIQUE INDEX documents_scope_source ON documents (scope, source);
DROP INDEX learned_qa_question_md5;
CREATE UNIQUE INDEX learned_qa_scope_question_md5 ON learned_qa (scope, md5(question));

CREATE INDEX chunks_scope ON chunks (scope);
CREATE INDEX chunk_terms_scope ON chunk_terms (scope);
CREATE INDEX queries_scope ON queries (scope, id);
CREATE INDEX captures_scope ON captures (scope, id);

-- The full-text row follows its chunk's scope (006's bound on its text kept).
CREATE OR REPLACE FUNCTION chunk_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_terms (chunk_id, tsv, scope)
    VALUES (NEW.id, to_tsvector('english', left(coalesce(NEW.heading, '') || ' ' || NEW.text, 100000)), NEW.scope)
    ON CONFLICT (chunk_id) DO UPDATE SET tsv = EXCLUDED.tsv, scope = EXCLUDED.scope;
    RETURN NEW;
END $$;
