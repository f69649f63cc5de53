"""Facts out of conversation exchanges, off the request path: the capture pipeline and its gates
(`capture`), the string rules and the extractor's prompt and parser (`capture_rules`), the noise gate
learned from past rejections (`noise`), and captured facts stored as documents through the corpus's
ingest, older ones superseded (`facts`)."""
