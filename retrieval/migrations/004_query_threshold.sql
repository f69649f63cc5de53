-- The threshold in force when a query was served: the selector saw the candidates at or above it,
-- and training must show a model the same candidates.
ALTER TABLE queries ADD COLUMN threshold real;
