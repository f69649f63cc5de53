"""The corpus: what goes into the store and how. Reading files into documents (`sources`), ingest
(scrub, chunk, dedup, embed, store: `ingest`), which new chunks duplicate stored ones or sit near them
(`dedup`), and the writes and lookups on the documents and chunks tables (`store`). It uses the passage
text of `contracts` so the vector it stores is the one every selector reads."""
