"""The learned ranker's fits (stage `train_ranker`), each a listwise softmax over a query's candidates with
the used ones up, weighed by their inverse propensities: the query adapter, the fusion weights of
`retrieval.contracts.ranking_features`, and the domain gate's ramp. torch loads inside the functions."""

from __future__ import annotations

import numpy as np

from retrieval.contracts.ranking_features import FEATURES, domain_affinity
from retrieval.logs.feedback_records import query_position


def _padded(groups: list[dict]):
    """(candidates per query, mask, target): each query's used candidates share its unit of target mass, weighed by
    their inverse propensities, and each query by its `votes` (one question, one vote: a question asked k times
    weighs 1/k each time), scaled so the votes average 1 over the batch."""
    import torch

    n = max(len(g["texts"]) for g in groups)
    mask = torch.zeros(len(groups), n, dtype=torch.bool)
    target = torch.zeros(len(groups), n)
    votes = [g.get("votes", 1.0) for g in groups]
    scale = len(groups) / sum(votes)
    for i, g in enumerate(groups):
        mask[i, : len(g["texts"])] = True
        w = g.get("weights") or [1.0] * len(g["texts"])  # inverse propensities: 1 for a judge's labels
        target[i, g["used"]] = torch.tensor([w[j] for j in g["used"]]) / len(g["used"]) * votes[i] * scale
    return n, mask, target


def _listwise_loss(scores, mask, target):
    import torch

    z = scores.masked_fill(~mask, float("-inf"))
    return -(torch.log_softmax(z, dim=1).masked_fill(~mask, 0.0) * target).sum(1).mean()


def fit_adapter(groups: list[dict], *, l2: float, steps: int, lr: float, temperature: float, seed: int) -> np.ndarray:
    """W of the query adapter: a listwise softmax over each train query's candidates, W pulled toward 0 by `l2`;
    `steps` full-batch Adam steps at `lr`, cosines over `temperature`."""
    import torch

    torch.manual_seed(seed)
    d = groups[0]["q"].shape[0]
    n, mask, target = _padded(groups)
    q = torch.tensor(np.stack([g["q"] for g in groups]))
    cands = torch.zeros(len(groups), n, d)
    for i, g in enumerate(groups):
        cands[i, : len(g["texts"])] = torch.tensor(g["P"])
    w = torch.zeros(d, d, requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        qa = q + q @ w
        qa = qa / qa.norm(dim=1, keepdim=True)
        loss = _listwise_loss(torch.einsum("bd,bnd->bn", qa, cands) / temperature, mask, target) + l2 * (w**2).sum()
        loss.backward()
        opt.step()
    return w.detach().numpy().astype(np.float32)


def fit_weights(
    feats: list[dict[str, np.ndarray]], groups: list[dict], l2: float, names: tuple[str, ...] = FEATURES
) -> dict[str, float]:
    """The fusion weights of `ranker_scores` for the features `names` (the rest weigh 0), fitted listwise on
    (calibration) queries."""
    import torch

    n, mask, target = _padded(groups)
    x = torch.zeros(len(groups), n, len(names))
    for i, f in enumerate(feats):
        for j, name in enumerate(names):
            x[i, : len(f[name]), j] = torch.tensor(f[name], dtype=torch.float32)
    w = torch.zeros(len(names), requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=300, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = _listwise_loss(x @ w, mask, target) + l2 * (w**2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    fitted = dict(zip(names, (round(float(v), 6) for v in w.detach())))
    return {name: fitted.get(name, 0.0) for name in FEATURES}


def fit_gate(
    train_vecs: np.ndarray, fusion_groups: list[dict], on_train: bool, *, k: int, quantile: float, ramp: float
) -> dict:
    """The domain gate's ramp from the affinities (mean cosine to the `k` nearest train queries) of the queries
    the fusion was fitted on (in-domain queries; when they are the train queries themselves, each one's own copy
    is left out): hi is their `quantile`, lo = hi - `ramp`."""
    aff = [domain_affinity(g["q"], train_vecs, k, exclude_self=on_train) for g in fusion_groups]
    hi = round(float(np.quantile(aff, quantile)), 4)
    return {"k": k, "lo": round(hi - ramp, 4), "hi": hi}


def out_of_fold(groups: list[dict], folds: int, fit, features_of) -> list[dict] | None:
    """Cross-fitting: each query's features under an adapter fitted without its fold (`fit(groups) -> W`,
    `features_of(group, W)`); folds by the query's hash position, so a query always lands in the same one.
    None where fewer than two folds hold a query (a tiny log): nothing would be held out of some fit."""
    fold = [int(query_position(g["query"]) * 0xFFFFFFFF) % folds for g in groups]
    if len(set(fold)) < 2:
        return None
    out: list[dict] = [{}] * len(groups)
    for f in sorted(set(fold)):
        w = fit([g for g, x in zip(groups, fold) if x != f])
        for i, g in enumerate(groups):
            if fold[i] == f:
                out[i] = features_of(g, w)
    return out
