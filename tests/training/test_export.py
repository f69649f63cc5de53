"""Stage `export`: what Ollama reads (the Modelfile's template is the training chat template, rendered) and the
params it refuses. The export itself (merge, convert, quantize, parity) runs in tests/eval/test_promotion.py,
whose tiny GGUFs it registers."""

from pathlib import Path

from retrieval.contracts.selection import PromptCandidate, render_messages
from training.export import ExportParams, modelfile

REPO = Path(__file__).resolve().parents[2]


def test_modelfile_template_renders_the_training_chat_template():
    from training.base_model import qwen2_tokenizer
    from training.export import modelfile_prompt

    tok = qwen2_tokenizer(REPO / ".pai" / "cache")
    msgs = render_messages("q?", [PromptCandidate("a/b.md", "H", "text")], 5, 24)
    assert modelfile_prompt(msgs[0]["content"], msgs[1]["content"]) == tok.apply_chat_template(
        msgs, add_generation_prompt=True, tokenize=False
    )


def test_modelfile_is_greedy_stops_at_the_end_of_turn_and_sets_the_context():
    text = modelfile("selector.gguf", 2048)
    assert text.splitlines()[0] == "FROM ./selector.gguf" and 'TEMPLATE """' in text
    assert 'PARAMETER stop "<|im_end|>"' in text and 'PARAMETER stop "<|endoftext|>"' in text
    assert "PARAMETER temperature 0" in text and "PARAMETER num_ctx 2048" in text


def test_params_problems_are_reported_together():
    assert ExportParams().problems() == []
    bad = ExportParams(quant="q2_k", parity_prompts=0, gpu_merge_base="unsloth/Qwen2.5-14B-Instruct-bnb-4bit")
    assert bad.problems() == [
        "export.quant must be one of q4_k_m, q8_0, f16, not 'q2_k'",
        "export: need parity_prompts >= 1, parity_tokens >= 1, 0 <= parity_min <= 1",
        "export.gpu_merge_base must be a 16-bit model, not 'unsloth/Qwen2.5-14B-Instruct-bnb-4bit' "
        "(never merge into 4-bit)",
    ]
