"""The base model a selector is trained from, per profile, and its tokenizer.

GPU profile: Qwen2.5-14B-Instruct (Unsloth's 4-bit checkpoint) from the model cache. CPU profile:
a tiny Qwen2-architecture model built from a config, with the *real* Qwen2 tokenizer, so the same
transformers/peft/trl code runs. No model hub here: the tokenizer comes from the GGUF vocabulary
that llama.cpp ships inside the llama-cpp-python source package (PyPI), cached after first use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LLAMA_CPP_SDIST = "llama-cpp-python==0.3.36"  # also pins the GGUF converter used by export
VOCAB = "ggml-vocab-qwen2.gguf"
EOS, PAD = "<|im_end|>", "<|endoftext|>"


def llama_cpp_tree(cache: Path) -> Path:
    """vendor/llama.cpp of the pinned llama-cpp-python sdist (downloaded from PyPI once)."""
    root = cache / "llama.cpp"
    if (root / "models" / VOCAB).exists():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                "llama-cpp-python",  # this sdist only: its build dependencies come as wheels (all from source took >10 min)
                LLAMA_CPP_SDIST,
                "-d",
                tmp,
            ],
            check=True,
        )
        (sdist,) = Path(tmp).glob("llama_cpp_python-*.tar.gz")
        staging = Path(tmp) / "x"
        with tarfile.open(sdist) as tar:
            members = [
                m
                for m in tar.getmembers()
                if "/vendor/llama.cpp/" in m.name
                and (m.isfile() or m.isdir())  # no links, devices
                and not (m.name.startswith("/") or ".." in PurePosixPath(m.name).parts)
                and (
                    m.name.endswith(f"models/{VOCAB}")
                    or "/gguf-py/" in m.name
                    or "/conversion/" in m.name
                    or m.name.endswith("convert_hf_to_gguf.py")
                )
            ]
            # the "data" filter where this Python has it (3.11.4+; Debian bookworm's 3.11.2 has not): the members
            # above are already plain files and folders inside the archive
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(staging, members=members, **safe)  # noqa: S202 - members checked above
        (src,) = staging.glob("*/vendor/llama.cpp")
        root.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
        shutil.move(str(src), root)
    return root


def training_chat_template() -> str:
    """Qwen2.5's chat template as TRL ships it (the official one). For assistant-only loss SFTTrainer swaps in its
    `_training` twin (`trl.chat_template_utils.get_training_chat_template`), which adds `{% generation %}` markers
    and renders the same text; both profiles train, and export renders, with this template."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


def qwen2_tokenizer(cache: Path):
    """The real Qwen2 tokenizer (151,936 tokens) with the Qwen2.5 chat template, offline."""
    from transformers import AutoTokenizer

    saved = cache / "qwen2-tokenizer"
    if not (saved / "tokenizer_config.json").exists():
        tok = AutoTokenizer.from_pretrained(llama_cpp_tree(cache) / "models", gguf_file=VOCAB)
        tok.chat_template = training_chat_template()
        tok.eos_token, tok.pad_token = EOS, PAD
        tok.save_pretrained(saved)
    return AutoTokenizer.from_pretrained(saved)


# Qwen2.5-14B-Instruct's architecture (its config.json): the GPU smoke run builds this with random
# weights where no hub is reachable, to measure memory and speed of the real shapes.
QWEN25_14B = dict(hidden=5120, layers=48, heads=40, kv_heads=8, intermediate=13824, vocab_size=152064)


def tiny_qwen2(vocab_size: int, hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int, seed: int):
    """A Qwen2ForCausalLM from a config, randomly initialised (the CPU profile's base)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=intermediate,
        tie_word_embeddings=True,
        max_position_embeddings=32768,
        torch_dtype="float32",
    )
    return Qwen2ForCausalLM(config)
