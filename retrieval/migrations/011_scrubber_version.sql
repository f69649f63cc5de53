-- The scrubber version a document's chunks were scrubbed with (retrieval.scrub.version()); NULL: before
-- versions were recorded. `pai maintain` re-scrubs documents whose version is not the current one, so a
-- rule added today protects what was ingested last month.
ALTER TABLE documents ADD COLUMN scrubbed_with text;
CREATE INDEX documents_scrubbed_with ON documents (scrubbed_with);
