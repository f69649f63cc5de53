-- A thumbs-up on a long question failed (/query takes 4,000 characters; a btree entry holds at most 2,704
-- bytes): the unique key of a learned answer is now the md5 of its question.
ALTER TABLE learned_qa DROP CONSTRAINT learned_qa_question_key;
CREATE UNIQUE INDEX learned_qa_question_md5 ON learned_qa (md5(question));
