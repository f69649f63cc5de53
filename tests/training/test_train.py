"""The train stage's CPU profile: the real Qwen2 tokenizer, a tiny Qwen2, LoRA via trl, on literal examples."""

import json

from retrieval.contracts.selection import PromptCandidate, render_answer, render_messages
from training.train import TrainParams, train


def write_examples(path, n):
    with open(path, "w") as f:
        for i in range(n):
            msgs = render_messages(
                f"question {i}?",
                [PromptCandidate(f"/d/{j}.md", None, f"passage {j} about {i}") for j in range(1, 4)],
                2,
                16,
            )
            msgs.append({"role": "assistant", "content": render_answer([1 + i % 3])})
            f.write(json.dumps({"messages": msgs, "meta": {}}) + "\n")


def test_cpu_profile_trains_saves_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    data = tmp_path / "data"
    data.mkdir()
    write_examples(data / "train.jsonl", 6)
    write_examples(data / "val.jsonl", 2)
    p = TrainParams(
        profile="cpu",
        data=str(data),
        out=str(tmp_path / "model"),
        cpu_max_examples=4,
        batch_size=2,
        grad_accum=1,
        epochs=1.0,
        cpu_max_length=400,
        cpu_base="tiny",
    )
    m = train(p)
    assert (m["profile"], m["train_examples"], m["steps"]) == ("cpu", 4, 2)
    assert m["train_loss_first"] > 0 and m["eval_loss"] is not None
    cfg = json.loads((tmp_path / "model" / "train_config.json").read_text())
    assert cfg["prompt_version"] == "pai-select/2" and cfg["lora_r"] == 16 and cfg["profile"] == "cpu"
    assert (tmp_path / "model" / "adapter" / "adapter_config.json").exists()
    import mlflow

    run = mlflow.get_run(cfg["mlflow_run_id"])
    assert run.data.params["lora_r"] == "16" and run.data.params["dataset_sha256"] == cfg["dataset_sha256"]
    assert [m.step for m in mlflow.MlflowClient().get_metric_history(run.info.run_id, "train_loss")] == [1, 2]
    # the same run again resumes from its finished checkpoint instead of starting over ...
    again = train(p)
    assert again["steps"] == 2 and again["seconds"] < m["seconds"]
    # ... but a run with other params or data never resumes someone else's checkpoint
    from dataclasses import replace

    other = train(replace(p, learning_rate=1e-3))
    assert (
        other["steps"] == 2
        and other["seconds"] > again["seconds"]
        and json.loads((tmp_path / "model" / "train_config.json").read_text())["learning_rate"] == 1e-3
    )
    assert (tmp_path / "model" / "checkpoints" / "fingerprint.txt").read_text().endswith('"cpu"]')


def test_examples_too_long_are_dropped_and_counted(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_examples(data / "train.jsonl", 3)
    write_examples(data / "val.jsonl", 1)
    import pytest

    with pytest.raises(SystemExit, match="no example fits max_length 50"):
        train(TrainParams(profile="cpu", data=str(data), out=str(tmp_path / "m"), cpu_max_length=50, cpu_base="tiny"))
