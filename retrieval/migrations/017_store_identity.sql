-- The store's identity (issue 57, item 0): one random id per database, made when it is created. Whatever is exported
-- from the store (the pull's feedback file and watermark) carries it, so an export never merges another store's rows
-- (query ids start at 1 in every database).
CREATE TABLE store_identity (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO store_identity DEFAULT VALUES;
