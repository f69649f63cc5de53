"""What training, evaluation and serving must compute the same way, defined once and versioned where a
model depends on it: the selection prompt and output parser (`selection`, PROMPT_VERSION), a passage's
text (`passage`), the learned ranker's features and weights (`ranking_features`, RANKER_FORMAT), BM25
over a handful of candidates (`lexical`) and the pure metrics (`metrics`). Pure code: it touches no
database."""
