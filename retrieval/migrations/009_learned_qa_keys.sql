-- A thumbs-up on a long question failed (/query takes 4,000 characters; a btree entry holds at most 2,704
-- bytes): the unique key of a learned answer is now the md5 of its question.
ALTER TABLE learned_qa DROP CONSTRAINT learned_qa_question_key;
CREATE UNIQUE INDEX learned_qa_question_md5 ON learned_qa (md5(question));
-- Whether this query's thumbs-up is counted in its learned answer's quality_score, so taking it back takes
-- back only what it gave (a thumbs-up without an answer gives nothing).
ALTER TABLE queries ADD COLUMN learned_up boolean NOT NULL DEFAULT false;
UPDATE queries q SET learned_up = true
WHERE q.rating = 1 AND coalesce(q.correction, q.answer) IS NOT NULL
  AND EXISTS (SELECT 1 FROM learned_qa l WHERE md5(l.question) = md5(q.text));
