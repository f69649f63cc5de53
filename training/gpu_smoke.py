"""GPU smoke run of the train stage's Unsloth path, for a box where no model hub is reachable.

Builds Qwen2.5-14B-Instruct's architecture (`base_model.QWEN25_14B`) with random weights, saves it in
bf16 and loads it through the train stage's own `gpu_model_and_tokenizer` (Unsloth, 4-bit, LoRA from
params.yaml, gradient checkpointing "unsloth"). Then the stage's `sft_trainer` runs a few steps on the
longest real 20-candidate prompts at each batch size, and the model greedily decodes one answer.
Measured: peak VRAM (allocated and reserved), step time, tokens/s, prefill and decode speed. The
weights are random, so memory and speed are those of the real shapes and the losses mean nothing.
OUT/gpu_smoke.json is rewritten after every phase, so a run cut short still reports what it reached.

    pai lab gpu-smoke --data DIR --tokenizer DIR --out FILE [--size 14b|tiny] [--backend unsloth|hf4bit|hf]

`--backend hf4bit` is the same QLoRA without Unsloth (transformers + bitsandbytes + peft); `hf` is
bf16 LoRA without quantization (and, with `--size tiny`, runs on a CPU: the test of this script).
This module builds, prequantizes and loads the model and runs the phases; `smoke_measures.py` measures.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

from retrieval.params import load_section

from .base_model import QWEN25_14B, training_chat_template
from .smoke_measures import GIB, Report, decode_speed, environment, memory, train_steps
from .train import LORA_TARGETS, TrainParams, gpu_model_and_tokenizer, load_examples


def build_base(size: str, tokenizer_dir: Path, base_dir: Path, seed: int) -> dict:
    """A Qwen2-architecture checkpoint with random weights (bf16 on a GPU), with the Qwen2 tokenizer."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.chat_template = training_chat_template()
    shape = (
        QWEN25_14B
        if size == "14b"
        else dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab_size=len(tok))
    )
    cuda = torch.cuda.is_available()
    config = Qwen2Config(
        vocab_size=shape["vocab_size"],
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate"],
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=size != "14b",
        torch_dtype="bfloat16" if cuda else "float32",
    )
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if cuda else torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda" if cuda else "cpu"):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(base_dir, max_shard_size="5GB")
    tok.save_pretrained(base_dir)
    del model
    if cuda:
        torch.cuda.empty_cache()
    return {
        "params_billion": round(params / 1e9, 3),
        "shape": shape,
        "checkpoint_gib": round(sum(f.stat().st_size for f in base_dir.glob("*.safetensors")) / GIB, 2),
    }


def load(backend: str, p: TrainParams, base_dir: Path):
    """(model with LoRA attached, tokenizer) by the chosen backend."""
    import torch

    if backend == "unsloth":
        model, tok, *_ = gpu_model_and_tokenizer(replace(p, gpu_base_model=str(base_dir)))
        return model, tok
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    tok = AutoTokenizer.from_pretrained(base_dir)
    cuda = torch.cuda.is_available()
    kwargs = {"dtype": torch.bfloat16 if cuda else torch.float32}
    if cuda:
        kwargs["device_map"] = {"": 0}
    if backend == "hf4bit":
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
    model = AutoModelForCausalLM.from_pretrained(base_dir, **kwargs)
    if backend == "hf4bit":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    elif cuda:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    lora = LoraConfig(
        r=p.lora_r,
        lora_alpha=p.lora_alpha,
        lora_dropout=p.lora_dropout,
        target_modules=LORA_TARGETS,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora), tok


def prequantize(p: TrainParams, base_dir: Path, report: Report, keep: bool) -> Path:
    """Load the bf16 checkpoint in 4-bit with Unsloth and save that: a checkpoint like Unsloth's `-bnb-4bit` ones."""
    import torch
    from unsloth import FastLanguageModel

    t0 = time.perf_counter()
    model, tok = FastLanguageModel.from_pretrained(str(base_dir), max_seq_length=p.gpu_max_length, load_in_4bit=True)
    out = base_dir.with_name(base_dir.name + "-bnb-4bit")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    gc.collect()  # Unsloth's patched modules hold reference cycles: without this the bf16-loaded copy outlives `del`
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    if not keep:
        shutil.rmtree(base_dir, ignore_errors=True)
    report.phase(
        "prequantize",
        seconds=round(time.perf_counter() - t0, 1),
        checkpoint_gib=round(sum(f.stat().st_size for f in out.glob("*.safetensors")) / GIB, 2),
        dir=str(out),
    )
    return out


def run(
    data: Path,
    tokenizer: Path,
    out: Path,
    size: str = "14b",
    backends: list[str] | None = None,
    batches: list[int] = (1, 2),
    steps: int = 3,
    prequantize_4bit: bool = False,
    base_dir: Path | None = None,
    params: str = "params.yaml",
) -> None:
    """The smoke run (`pai lab gpu-smoke`): `out` is the JSON report, rewritten after every phase; `backends`
    are tried in order until one trains (default unsloth, hf4bit)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    report = Report(Path(out))
    p = load_section(params, "train", TrainParams)
    report.phase(
        "environment",
        **environment(),
        params={k: getattr(p, k) for k in ("lora_r", "lora_alpha", "lora_dropout", "gpu_max_length")},
    )
    shm = Path("/dev/shm")
    given_base = base_dir is not None
    base_dir = (
        Path(base_dir)
        if given_base
        else Path(
            tempfile.mkdtemp(
                prefix="pai-base-", dir=shm if shm.is_dir() and shutil.disk_usage(shm).free > 40 * GIB else None
            )
        )
    )
    t0 = time.perf_counter()
    report.phase(
        "build",
        **build_base(size, Path(tokenizer), base_dir, p.seed),
        seconds=round(time.perf_counter() - t0, 1),
        dir=str(base_dir),
    )
    if prequantize_4bit:
        base_dir = prequantize(p, base_dir, report, keep=given_base)
    for backend in backends or ["unsloth", "hf4bit"]:
        try:
            t0 = time.perf_counter()
            model, tok = load(backend, p, base_dir)
            report.phase(f"{backend}:load", seconds=round(time.perf_counter() - t0, 1), **memory())
            max_length = p.gpu_max_length
            rows, dropped = load_examples(Path(data) / "train.jsonl", tok, max_length, None)
            lengths = [
                len(tok.apply_chat_template(r["messages"], tokenize=True, return_dict=True)["input_ids"]) for r in rows
            ]
            order = sorted(
                range(len(rows)), key=lambda i: -lengths[i]
            )  # the longest prompts: the worst case for memory
            rows, lengths = [rows[i] for i in order], [lengths[i] for i in order]
            for batch in batches:
                report.phase(
                    f"{backend}:train_b{batch}",
                    **train_steps(model, tok, p, rows, lengths, batch, steps, max_length),
                    dropped_too_long=dropped,
                )
            report.phase(f"{backend}:decode", **decode_speed(model, tok, rows[0]["messages"], backend))
            break
        except Exception as e:  # the next backend still measures something; the reason is kept
            report.phase(
                f"{backend}:failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-3000:]
            )
            import torch

            model = tok = None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    if not given_base:
        shutil.rmtree(base_dir, ignore_errors=True)  # (a prequantized copy sits beside a given --base-dir)
