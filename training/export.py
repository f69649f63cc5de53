"""Stage `export`: the trained selector as a GGUF that Ollama (or llama.cpp in-process) serves.

1. Merge the LoRA adapter into a 16-bit copy of the base (never into a 4-bit one): the CPU profile's
   tiny base is the one saved beside the adapter; the GPU profile merges into `export.gpu_merge_base`
   (the 16-bit twin of Unsloth's bnb-4bit checkpoint; ~30 GB of RAM and disk for 14B in bf16).
2. Convert with llama.cpp's `convert_hf_to_gguf.py` (pinned with the llama-cpp-python sdist, see
   `base_model.LLAMA_CPP_SDIST`) to f16, then quantize with llama.cpp (`q4_k_m` default, `q8_0`, `f16`).
3. Write a Modelfile whose TEMPLATE renders exactly the training chat template, with its stop
   tokens, `num_ctx` and `temperature 0`.
4. Parity: on N validation prompts the GGUF (llama-cpp-python) and the merged HF model decode the
   same greedy tokens and pick the same candidates; the served path (grammar-constrained) must parse.
   Below `export.parity_min` the stage fails. The record `selector.json` (GGUF path and sha256,
   prompt format, base model, parity) is what deploy registers and the service loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from retrieval.contracts.selection import parse_selection
from retrieval.db import pai_home
from retrieval.files import files_sha256, write_atomic
from retrieval.params import load_section
from serving.llm_selectors import OLLAMA_TEMPLATE, LlamaCppSelector

from .base_model import EOS, PAD, llama_cpp_tree
from .build import BuildParams

QUANTS = ("q4_k_m", "q8_0", "f16")
MAX_NEW_TOKENS = 48  # a selection is ~15 tokens; num_ctx leaves room for this many


@dataclass(frozen=True)
class ExportParams:
    """The export stage: the LoRA merged and written as GGUF with its Modelfile, checked for parity."""

    model: str = "models/selector"
    """the train stage's folder"""
    out: str = "models/export"
    """declared once, evaluate and deploy alias it; selector.gguf, Modelfile, selector.json (the version record),
    metrics.json"""
    quant: str = "q4_k_m"
    """q4_k_m | q8_0 | f16 (llama.cpp quantization of the merged 16-bit model)"""
    cpu_quant: str = "f16"
    """the CPU profile's quantization: its 135 M model is 271 MB at f16; quantized, it picked as the HF model on 18 of
    20 prompts at q8_0 and 7 of 8 at q4_k_m, under parity_min (docs/measurements.md, "The LLM selector on real
    weights")"""
    gpu_merge_base: str = "unsloth/Qwen2.5-14B-Instruct"
    """GPU profile: the LoRA merges into this 16-bit base, never the 4-bit one"""
    parity_prompts: int = 4
    """validation prompts decoded by both the HF model and the GGUF (about 6 s each for the 135 M model on 2 cores;
    an export that is wrong disagrees on most of them)"""
    parity_tokens: int = 24
    """greedy tokens compared per prompt"""
    parity_min: float = 0.95
    """GGUF/HF pick agreement below this fails the stage"""

    def problems(self) -> list[str]:
        out = []
        for name, quant in (("quant", self.quant), ("cpu_quant", self.cpu_quant)):
            if quant not in QUANTS:
                out.append(f"export.{name} must be one of {', '.join(QUANTS)}, not {quant!r}")
        if self.parity_prompts < 1 or self.parity_tokens < 1 or not 0 <= self.parity_min <= 1:
            out.append("export: need parity_prompts >= 1, parity_tokens >= 1, 0 <= parity_min <= 1")
        if "bnb-4bit" in self.gpu_merge_base or "4bit" in self.gpu_merge_base.lower():
            out.append(
                f"export.gpu_merge_base must be a 16-bit model, not {self.gpu_merge_base!r} (never merge into 4-bit)"
            )
        return out


class ExportError(RuntimeError):
    pass


def modelfile_prompt(system: str, prompt: str) -> str:
    """OLLAMA_TEMPLATE with Ollama's substitutions applied (what the model reads)."""
    return OLLAMA_TEMPLATE.replace("{{ .System }}", system).replace("{{ .Prompt }}", prompt)


def modelfile(gguf_name: str, num_ctx: int) -> str:
    return "\n".join(
        [
            f"FROM ./{gguf_name}",
            f'TEMPLATE """{OLLAMA_TEMPLATE}"""',
            f'PARAMETER stop "{EOS}"',
            f'PARAMETER stop "{PAD}"',
            "PARAMETER temperature 0",
            f"PARAMETER num_ctx {num_ctx}",
            "",
        ]
    )


def merge(model_dir: Path, p: ExportParams, dest: Path):
    """Base (16-bit) + adapter merged and saved as a plain HF checkpoint in `dest`; returns (model, tokenizer)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = model_dir / "base" / "source.json"
    cached = json.loads(source.read_text()).get("base_path") if source.exists() else None  # CPU: the cache's base
    local = (model_dir / "base" / "config.json").exists() or cached
    base = str(model_dir / "base") if (model_dir / "base" / "config.json").exists() else cached or p.gpu_merge_base
    dtype = torch.float32 if local else torch.bfloat16  # the CPU bases are fp32; 14B merges in bf16
    tok = AutoTokenizer.from_pretrained(model_dir / "adapter")
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    model = PeftModel.from_pretrained(model, model_dir / "adapter").merge_and_unload().eval()
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    return model, tok


def convert(merged: Path, f16: Path, cache: Path) -> None:
    tree = llama_cpp_tree(cache)
    env = {**os.environ, "PYTHONPATH": str(tree / "gguf-py"), "NO_LOCAL_GGUF": ""}
    run = subprocess.run(
        [sys.executable, str(tree / "convert_hf_to_gguf.py"), str(merged), "--outfile", str(f16), "--outtype", "f16"],
        capture_output=True,
        text=True,
        env=env,
    )
    if run.returncode != 0 or not f16.exists():
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ExportError(f"convert_hf_to_gguf failed: {tail[0]}")


def quantize(f16: Path, out: Path, quant: str) -> None:
    if quant == "f16":
        shutil.copyfile(f16, out)
        return
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = {"q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}[quant]
    with quiet_stderr() as log:  # llama.cpp prints a line per tensor; shown only when it fails
        failed = llama_cpp.llama_model_quantize(str(f16).encode(), str(out).encode(), params) != 0
    if failed:
        raise ExportError(f"llama.cpp could not quantize {f16} to {quant}: {log.read_text()[-300:]}")


@contextlib.contextmanager
def quiet_stderr():
    """Native libraries' writes to fd 2 go to a temporary file (yielded) instead of the terminal."""
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as f:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(f.fileno(), 2)
        try:
            yield Path(f.name)
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def val_prompts(data_dir: Path, n: int) -> list[tuple[list[dict], str]]:
    """The first `n` validation examples: ([system, user] messages, the reference assistant answer)."""
    out = []
    for line in open(data_dir / "val.jsonl", encoding="utf-8"):
        messages = json.loads(line)["messages"]
        out.append((messages[:2], messages[2]["content"]))
        if len(out) >= n:
            break
    return out


FINER = {"q4_k_m": "q8_0", "q8_0": "f16"}  # a parity failure's next step


def parity(model, tok, gguf: Path, prompts: list[list[dict]], n_tokens: int, num_ctx: int, chunk_tokens: int) -> dict:
    """HF (merged) vs GGUF on the same prompt tokens, greedy; then the GGUF as served (grammar)."""
    import torch

    served = LlamaCppSelector(gguf, "parity", chunk_tokens, n_ctx=num_ctx)
    same_tokens = same_picks = served_ok = forced_same = forced_total = 0
    rows = []
    try:
        for messages, answer in prompts:
            n = messages[1]["content"].count("\n[")  # candidates are "[i] source" lines
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
            with torch.inference_mode():
                out = model.generate(
                    torch.tensor([ids]),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    max_new_tokens=n_tokens,
                    do_sample=False,
                    pad_token_id=tok.pad_token_id,
                )
            hf = [t for t in out[0, len(ids) :].tolist() if t != tok.pad_token_id]
            hf = hf[: hf.index(tok.eos_token_id)] if tok.eos_token_id in hf else hf
            gg = served.complete_tokens(ids, n_tokens)
            # teacher-forced: both models read the reference answer; their top token at each step must match
            ans = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            with torch.inference_mode():
                hf_top = (
                    model(torch.tensor([ids + ans]))
                    .logits[0, len(ids) - 1 : len(ids) - 1 + len(ans)]
                    .argmax(-1)
                    .tolist()
                )
            gg_top = served.forced_argmax(ids, ans)
            forced_same += sum(a == b for a, b in zip(hf_top, gg_top))
            forced_total += len(ans)
            hf_pick = parse_selection(tok.decode(hf, skip_special_tokens=True), n)
            gg_pick = parse_selection(tok.decode(gg, skip_special_tokens=True), n)
            same_tokens += hf == gg
            same_picks += (hf_pick.selected, hf_pick.status) == (gg_pick.selected, gg_pick.status)
            sel = parse_selection(served.chat(messages, n, 5), n)
            served_ok += sel.status != "fallback"
            rows.append(
                {"hf": tok.decode(hf[:n_tokens]), "gguf": tok.decode(gg[:n_tokens]), "served": list(sel.selected)}
            )
    finally:
        served.close()
    n = len(prompts)
    return {
        "prompts": n,
        "token_agreement": round(same_tokens / n, 4),
        "pick_agreement": round(same_picks / n, 4),
        "forced_top1_agreement": round(forced_same / max(forced_total, 1), 4),
        "served_parse_rate": round(served_ok / n, 4),
        "examples": rows[:3],
    }


def exported_base(cfg: dict, quant: str, log=print) -> Path | None:
    """The base the LoRA was trained on, converted and quantized as the fine-tuned model is (once: kept beside the
    base in the model cache), so the LLM chain's evaluation compares the two through the same export path and the
    difference is the fine-tune's alone. None where the base is not in the model cache (the GPU profile's hub
    model: evaluate scores no base there)."""
    base = Path(cfg.get("base_path") or "")
    if not cfg.get("base_path") or not (base / "config.json").exists():
        return None
    out = base.with_name(f"{base.name}-{quant}.gguf")
    if out.exists():
        return out
    log(f"export: the base as exported ({quant}), once: {out}")
    with tempfile.TemporaryDirectory(dir=base.parent) as tmp:
        f16, staged = Path(tmp) / "f16.gguf", Path(tmp) / "base.gguf"
        convert(base, f16, pai_home() / "cache")
        quantize(f16, staged, quant)
        os.replace(staged, out)
    return out


def export(p: ExportParams, data_dir: Path, log=print) -> dict:
    model_dir, out = Path(p.model), Path(p.out)
    cfg_path = model_dir / "train_config.json"
    if not cfg_path.exists():
        raise ExportError(f"{cfg_path} not found: run the train stage first")
    cfg = json.loads(cfg_path.read_text())
    num_ctx = int(cfg.get("max_length", 4096)) + MAX_NEW_TOKENS
    quant = p.cpu_quant if cfg.get("profile") == "cpu" else p.quant
    out.mkdir(parents=True, exist_ok=True)
    gguf = out / "selector.gguf"
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        merged, f16, staged = Path(tmp) / "merged", Path(tmp) / "f16.gguf", Path(tmp) / "selector.gguf"
        t0 = time.perf_counter()
        log(f"export: merging {model_dir / 'adapter'} into its 16-bit base")
        model, tok = merge(model_dir, p, merged)
        t_merge = time.perf_counter() - t0
        log("export: converting to GGUF f16 (llama.cpp convert_hf_to_gguf.py)")
        convert(merged, f16, pai_home() / "cache")
        t_convert = time.perf_counter() - t0 - t_merge
        quantize(f16, staged, quant)
        f16_bytes = f16.stat().st_size
        t_quant = time.perf_counter() - t0 - t_merge - t_convert
        log(f"export: quantized to {quant}; parity on {p.parity_prompts} validation prompts")
        prompts = val_prompts(data_dir, p.parity_prompts)
        checks = parity(model, tok, staged, prompts, p.parity_tokens, num_ctx, int(cfg["chunk_tokens"]))
        if checks["pick_agreement"] < p.parity_min:
            raise ExportError(
                f"parity: GGUF ({quant}) and HF pick the same candidates on {checks['pick_agreement']:.0%} "
                f"of {checks['prompts']} prompts, under export.parity_min {p.parity_min:.0%}; "
                + (f"export a finer quantization ({FINER[quant]})" if quant in FINER else "the export itself is wrong")
            )
        os.replace(staged, gguf)  # only a GGUF that passed parity lands in out/
    base_gguf = exported_base(cfg, quant, log)
    sha = files_sha256(gguf)
    write_atomic(out / "Modelfile", modelfile(gguf.name, num_ctx))
    record = {
        "kind": "llm",
        "version": f"gguf:{sha[:12]}",
        "gguf": str(gguf.resolve()),
        "gguf_sha256": sha,
        "quant": quant,
        "num_ctx": num_ctx,
        "prompt_version": cfg["prompt_version"],
        "chunk_tokens": cfg["chunk_tokens"],
        "k": cfg["k"],
        "base_model": cfg["base_model"],
        "base_gguf": str(base_gguf) if base_gguf else None,
        "profile": cfg["profile"],
        "dataset_sha256": cfg["dataset_sha256"],
        "train_run_id": cfg.get("mlflow_run_id"),
        "git_commit": cfg.get("git_commit"),
    }
    write_atomic(out / "selector.json", json.dumps(record, indent=2) + "\n")
    metrics = {
        "quant": quant,
        "gguf_mb": round(gguf.stat().st_size / 1e6, 2),
        "f16_mb": round(f16_bytes / 1e6, 2),
        "merge_s": round(t_merge, 1),
        "convert_s": round(t_convert, 1),
        "quantize_s": round(t_quant, 2),
        **{k: v for k, v in checks.items() if k != "examples"},
    }
    write_atomic(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    return {**metrics, "examples": checks["examples"], "sha256": sha}


def main() -> None:
    console = Console(stderr=True)
    p = load_section("params.yaml", "export", ExportParams)
    try:
        m = export(p, Path(load_section("params.yaml", "build", BuildParams).out), lambda s: console.print(s))
    except ExportError as e:
        console.print(f"[red]export failed:[/red] {e}", soft_wrap=True)
        raise SystemExit(1) from None
    console.print(
        f"export: {p.out}/selector.gguf ({m['quant']}, {m['gguf_mb']} MB, sha256 {m['sha256'][:12]}); parity on "
        f"{m['prompts']} prompts: picks {m['pick_agreement']:.0%}, greedy tokens {m['token_agreement']:.0%}, "
        f"teacher-forced top-1 {m['forced_top1_agreement']:.0%}, "
        f"served output parses {m['served_parse_rate']:.0%}",
        soft_wrap=True,
    )


if __name__ == "__main__":
    main()
