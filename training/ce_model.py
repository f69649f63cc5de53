"""The cross-encoder the `train_ce` stage trains: MiniLM's first layers reading a (query, passage) pair
jointly, mean-pooled, under a one-logit head; the head probed on frozen features, then everything fine-tuned;
its scores per query and the val Recall@k evaluator that picks the best checkpoint. sentence-transformers,
transformers and torch load inside the functions, when training, not with `pai`."""

from __future__ import annotations

import math
import random
from pathlib import Path

from .ce_data import mean_recall


def ce_scores(model, groups: list[dict], batch_size: int = 32) -> list[list[float]]:
    """The model's score for every (query, passage) of every group, as lists per group."""
    flat = [(g["query"], t) for g in groups for t in g["texts"]]
    s = model.predict(flat, batch_size=batch_size, activation_fn=None, show_progress_bar=False).tolist() if flat else []
    out, at = [], 0
    for g in groups:
        out.append(s[at : at + len(g["texts"])])
        at += len(g["texts"])
    return out


def val_recall(groups: list[dict], k: int):
    """A sentence-transformers evaluator: mean Recall@k of the val queries ranked by the model; it
    remembers the curve. (Built here so that sentence-transformers loads when training, not with `pai`.)"""
    from sentence_transformers.base.evaluation import SentenceEvaluator

    class ValRecall(SentenceEvaluator):
        def __init__(self):
            super().__init__()
            self.groups, self.k, self.primary_metric = groups, k, f"recall@{k}"
            self.curve: list[dict] = []

        def __call__(self, model, output_path=None, epoch=-1, steps=-1) -> dict[str, float]:
            r = mean_recall(self.groups, ce_scores(model, self.groups), self.k)
            self.curve.append({"step": steps, "recall": round(r, 4)})
            return {self.primary_metric: r}

    return ValRecall()


def build_model(base: str, layers: int, max_length: int):
    """MiniLM's first `layers` layers, mean-pooled (the way all-MiniLM-L6-v2 was trained to be read: its
    [CLS] vector carries almost nothing), under a one-logit linear head."""
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    encoder = Transformer(base, config_kwargs={"num_hidden_layers": layers}, max_seq_length=max_length)
    dim = encoder.get_embedding_dimension()
    return CrossEncoder(
        modules=[encoder, Pooling(dim, "mean"), Dense(dim, 1, activation_function=None, module_output_name="scores")]
    )


def pooled(model, pairs: list[tuple[str, str]], batch_size: int = 32):
    """The head's input for each pair: the mean-pooled encoder output, (n, dim)."""
    import torch

    encoder, pooling = model[0], model[1]
    out = []
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(pairs), batch_size):
            out.append(pooling(encoder(model.preprocess(pairs[i : i + batch_size])))["sentence_embedding"])
    return torch.cat(out)


def fit_head(x, y, l2: float = 1e-3, steps: int = 200):
    """Logistic regression with balanced classes: (weight (1, dim), bias (1,)) on the raw features.

    A fresh head learns too slowly at fine-tuning learning rates (the pooled features vary by ~0.1 per
    dimension), so it is fitted first on frozen features (linear probe, then fine-tune)."""
    import torch

    x, y = x.float(), y.float()
    mu, sd = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mu) / sd
    w, b = torch.zeros(x.shape[1], requires_grad=True), torch.zeros(1, requires_grad=True)
    pos_weight = (len(y) - y.sum()) / y.sum().clamp_min(1)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (
            torch.nn.functional.binary_cross_entropy_with_logits(z @ w + b, y, pos_weight=pos_weight)
            + l2 * (w**2).sum()
        )
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return (w / sd).unsqueeze(0), b - (w * mu / sd).sum().unsqueeze(0)


def probe_head(model, pairs: list[dict], n: int, rng: random.Random) -> None:
    """Fit the head on frozen features of `n` sampled train pairs (linear probe, before the fine-tune)."""
    import torch

    sample = rng.sample(pairs, min(n, len(pairs)))
    weight, bias = fit_head(
        pooled(model, [(q["query"], q["text"]) for q in sample]), torch.tensor([q["label"] for q in sample])
    )
    with torch.no_grad():
        model[2].linear.weight.copy_(weight)
        model[2].linear.bias.copy_(bias)


def fine_tune(
    model,
    pairs: list[dict],
    evaluator,
    checkpoints: Path,
    *,
    epochs: float,
    batch_size: int,
    learning_rate: float,
    warmup_ratio: float,
    evals: int,
    patience: int,
    k: int,
    seed: int,
):
    """CrossEncoderTrainer + BinaryCrossEntropyLoss (positives weighted up to balance the classes); the
    best checkpoint by the evaluator's Recall@k is loaded at the end. Returns the trainer's state."""
    import torch
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import EarlyStoppingCallback

    n_pos = sum(q["label"] for q in pairs)
    every = max(1, math.ceil(math.ceil(len(pairs) / batch_size) * epochs / evals))
    loss = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor((len(pairs) - n_pos) / max(n_pos, 1)))
    args = CrossEncoderTrainingArguments(
        output_dir=str(checkpoints),
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_steps=warmup_ratio,
        seed=seed,
        use_cpu=not torch.cuda.is_available(),
        eval_strategy="steps",
        eval_steps=every,
        save_strategy="steps",
        save_steps=every,
        save_total_limit=2,
        load_best_model_at_end=True,
        metric_for_best_model=f"eval_recall@{k}",
        greater_is_better=True,
        logging_steps=max(1, every // 4),
        report_to=[],
        disable_tqdm=False,
    )
    trainer = CrossEncoderTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(pairs),
        loss=loss,
        evaluator=evaluator,
        callbacks=[EarlyStoppingCallback(early_stopping_patience=patience)],
    )
    trainer.train()
    return trainer.state
