"""The CPU profile's base model and its tokenizer (training/base_model.py): the real Qwen2 tokenizer with the
training chat template, built offline from the pinned llama.cpp vocabulary, and a tiny Qwen2 from a config,
the same weights for the same seed."""

from pathlib import Path

import torch

from training.base_model import EOS, PAD, qwen2_tokenizer, tiny_qwen2, training_chat_template

REPO = Path(__file__).resolve().parents[2]


def test_the_tokenizer_is_qwen2s_with_the_training_chat_template():
    tok = qwen2_tokenizer(REPO / ".pai" / "cache")
    assert len(tok) == 151_936 and (tok.eos_token, tok.pad_token) == (EOS, PAD) == ("<|im_end|>", "<|endoftext|>")
    assert tok.chat_template == training_chat_template()
    assert tok.encode("<|im_start|>") == [151644]  # a special token: one id, not pieces
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False).endswith("<|im_start|>assistant\n")


def test_a_tiny_qwen2_is_built_from_its_config_and_its_seed():
    a, b = tiny_qwen2(1000, 64, 2, 4, 2, 128, seed=13), tiny_qwen2(1000, 64, 2, 4, 2, 128, seed=13)
    cfg = a.config
    assert (cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (1000, 64, 2, 4)
    assert (cfg.num_key_value_heads, cfg.intermediate_size, cfg.tie_word_embeddings) == (2, 128, True)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    c = tiny_qwen2(1000, 64, 2, 4, 2, 128, seed=14)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
