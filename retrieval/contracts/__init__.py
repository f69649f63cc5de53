"""What training, evaluation and serving must compute the same way, defined once and versioned where a
model depends on it: the selection prompt and output parser (`selection`, PROMPT_VERSION), a passage's
text (`ce_input`, CE_INPUT_FORMAT), the learned ranker's features and weights (`ranking_features`,
RANKER_FORMAT), BM25 over a handful of candidates (`lexical`), a cross-encoder's learned fusion
(`learned_fusion`), the pure metrics (`metrics`) and the precision a model runs in on this CPU
(`cpu_dtype`). Pure code: it touches no database."""
