-- When a document was written, for the consumer to tell an older note from the newer one that corrects it
-- (ingest keeps both, near-linked): a file's modification time, else the time it was stored (a webhook note, a
-- captured fact). Documents stored before this migration take the time they were last stored.
ALTER TABLE documents ADD COLUMN written_at timestamptz;
UPDATE documents SET written_at = updated_at;
ALTER TABLE documents ALTER COLUMN written_at SET DEFAULT now(), ALTER COLUMN written_at SET NOT NULL;
