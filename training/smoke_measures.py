"""What the GPU smoke run (`gpu_smoke.py`) measures, and its report: the environment (package versions, the
GPU), peak VRAM, step times and tokens/s of the train stage's own trainer, prefill and greedy decode speed.
torch and transformers load inside the functions."""

from __future__ import annotations

import importlib.metadata as md
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from .train import TrainParams, sft_trainer

GIB = 1024**3


class Report:
    """The smoke run's findings, written out whole after every phase."""

    def __init__(self, path: Path):
        self.path, self.data = path, {"phases": {}}
        path.parent.mkdir(parents=True, exist_ok=True)

    def phase(self, name: str, **values) -> None:
        self.data["phases"][name] = values
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        tmp.replace(self.path)
        print(f"[gpu_smoke] {name}: {json.dumps(values, default=str)}", flush=True)


def memory() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {}
    return {
        "allocated_gib": round(torch.cuda.memory_allocated() / GIB, 2),
        "reserved_gib": round(torch.cuda.memory_reserved() / GIB, 2),
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / GIB, 2),
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / GIB, 2),
    }


def environment() -> dict:
    import torch

    versions = {}
    for name in (
        "torch",
        "transformers",
        "trl",
        "peft",
        "datasets",
        "accelerate",
        "bitsandbytes",
        "unsloth",
        "unsloth_zoo",
        "triton",
    ):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    gpu = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
    return {
        "versions": versions,
        "gpu": gpu.name if gpu else None,
        "gpu_memory_gib": round(gpu.total_memory / GIB, 1) if gpu else None,
    }


def train_steps(
    model, tok, p: TrainParams, rows: list[dict], lengths: list[int], batch: int, steps: int, max_length: int
) -> dict:
    """`steps` optimizer steps of the stage's trainer at `batch`; step times and the peak memory."""
    import torch
    from transformers import TrainerCallback

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t)

    n = batch * p.grad_accum * steps
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = sft_trainer(
            model,
            tok,
            replace(p, batch_size=batch),
            "gpu" if torch.cuda.is_available() else "cpu",
            max_length,
            rows[:n],
            [],
            Path(tmp),
            None,
            max_steps=steps,
            save_strategy="no",
            eval_strategy="no",
            disable_tqdm=True,
        )
        trainer.add_callback(Clock())
        result = trainer.train()
    tokens = sum(lengths[:n])
    warm = times[1:] or times
    per_step_tokens = tokens / steps
    return {
        "batch": batch,
        "grad_accum": p.grad_accum,
        "steps": result.global_step,
        "tokens_per_step": round(per_step_tokens),
        "max_tokens_in_batch": max(lengths[:n]),
        "first_step_s": round(times[0], 2),
        "step_s_warm": round(sum(warm) / len(warm), 2),
        "train_tokens_per_s": round(per_step_tokens / (sum(warm) / len(warm)), 1),
        "loss": [round(h["loss"], 3) for h in trainer.state.log_history if "loss" in h],
        **memory(),
    }


def decode_speed(model, tok, messages: list[dict], backend: str, new_tokens: int = 64) -> dict:
    """Prefill time of a 20-candidate prompt and greedy decode tokens/s after it."""
    import torch

    if backend == "unsloth":
        from unsloth import FastLanguageModel

        FastLanguageModel.for_inference(model)
    model.eval()
    ids = tok.apply_chat_template(messages[:2], add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = {k: v.to(model.device) for k, v in ids.items()}
    timings = {}
    for n in (1, new_tokens):
        with torch.no_grad():
            model.generate(**ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)  # warm-up: kernels, caches
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(**ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            timings[n] = time.perf_counter() - t0
    return {
        "prompt_tokens": int(ids["input_ids"].shape[1]),
        "prefill_s": round(timings[1], 3),
        "decode_tokens_per_s": round((new_tokens - 1) / max(timings[new_tokens] - timings[1], 1e-9), 1),
        **memory(),
    }
