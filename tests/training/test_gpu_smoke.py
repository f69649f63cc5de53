"""The GPU smoke script's own path on a CPU: a tiny Qwen2 from a config, the stage's SFT trainer, the report.

On a GPU it runs Unsloth on a Qwen2.5-14B-shaped model; here Unsloth is not installed, which is the
case of a backend that fails: it must be recorded and the next backend must still measure."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.contracts.selection import PromptCandidate, render_answer, render_messages
from retrieval.db import pai_home
from training.base_model import qwen2_tokenizer

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
def test_smoke_reports_each_phase_and_falls_back_past_a_failing_backend(tmp_path):
    tok_dir = pai_home() / "cache" / "qwen2-tokenizer"
    tok = qwen2_tokenizer(pai_home() / "cache")
    data = tmp_path / "data"
    data.mkdir()
    rows = []
    for i in range(4):  # lengths differ, so "longest first" is checkable
        msgs = render_messages(
            f"question {i}?", [PromptCandidate(f"/d/{j}.md", None, "word " * (5 + 10 * i)) for j in range(3)], 2, 64
        )
        rows.append({"messages": [*msgs, {"role": "assistant", "content": render_answer([1])}], "meta": {}})
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lengths = sorted(
        (len(tok.apply_chat_template(r["messages"], tokenize=True, return_dict=True)["input_ids"]) for r in rows),
        reverse=True,
    )

    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "lab",
            "gpu-smoke",
            "--data",
            str(data),
            "--tokenizer",
            str(tok_dir),
            "--out",
            str(out / "gpu_smoke.json"),
            "--size",
            "tiny",
            "--backend",
            "unsloth",
            "--backend",
            "hf",
            "--batches",
            "1,2",
            "--steps",
            "1",
            "--base-dir",
            str(tmp_path / "base"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    phases = json.loads((out / "gpu_smoke.json").read_text())["phases"]
    assert list(phases) == [
        "environment",
        "build",
        "unsloth:failed",
        "hf:load",
        "hf:train_b1",
        "hf:train_b2",
        "hf:decode",
    ]
    assert "unsloth" in phases["unsloth:failed"]["error"].lower()
    assert phases["build"]["shape"]["layers"] == 2 and (tmp_path / "base" / "config.json").exists()
    # params.yaml's accumulation applies: batch b x accum 2 x 1 step takes the 2b longest rows
    b1, b2 = phases["hf:train_b1"], phases["hf:train_b2"]
    assert (b1["steps"], b1["grad_accum"], b1["tokens_per_step"]) == (1, 2, sum(lengths[:2]))
    assert (b2["steps"], b2["tokens_per_step"], b2["max_tokens_in_batch"]) == (1, sum(lengths[:4]), lengths[0])
    assert all(x > 0 for x in (*b1["loss"], b1["train_tokens_per_s"], phases["hf:decode"]["decode_tokens_per_s"]))
    assert phases["hf:decode"]["prompt_tokens"] < lengths[0]  # the prompt without the answer
