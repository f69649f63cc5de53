"""Building a selector from a *version record*, and the selectors that need no model (the first-stage order,
the cascade). A record (written by export, registered by deploy, announced to the service) names the model; `resolve`
turns a record, a name or a path into a selector (the one way, for the service, eval, deploy and the CLI), for a
GGUF Ollama when it is reachable, else llama.cpp (`serving.llm_selectors`). Parsing, repair and fallback are the
contract's (`retrieval.contracts.selection.parse_selection`), never a backend's, so every backend is judged by the
same rules.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from retrieval.contracts.selection import (
    FIRST_STAGE,
    PromptCandidate,
    current_name,
    current_record,
    first_stage_order,
    render_answer,
)

from .interface import Selector, SelectorLoadError
from .llm_selectors import LlamaCppSelector, OllamaSelector, TransformersSelector, ollama_reachable
from .ranker import RankerSelector


class FirstStageSelector:
    """No selector: the first-stage order, the candidates as retrieval handed them over."""

    version = FIRST_STAGE
    answers_inline = True

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int, query_vec=None) -> str:
        return render_answer(list(first_stage_order(len(candidates), k)))


class CascadeSelector:
    """A fast selector answers inline (the ranker); a slow one (the LLM) refines in the
    background, and its pick is cached for the next same query (the picker's policy,
    `serving.picker.Picker.serve`); called directly, `answer` is the fast one's."""

    answers_inline = True

    def __init__(self, fast: Selector, slow: Selector):
        self.fast, self.slow = fast, slow
        self.version = f"cascade({fast.version}>{slow.version})"

    def answer(self, query: str, candidates: Sequence[PromptCandidate], k: int, query_vec=None) -> str:
        return self.fast.answer(query, candidates, k, query_vec)

    def close(self) -> None:
        for s in (self.fast, self.slow):
            getattr(s, "close", lambda: None)()


FOLDER_KINDS = {
    "ranker": ("ranker_config.json", "ranker"),
}  # kind: (config file, version prefix) of the selectors that are a trained folder, not a GGUF
FIRST_STAGE_RECORD = {"kind": FIRST_STAGE, "version": FIRST_STAGE}
# a record (registry, announcement) or folder (ce_config.json) of the retired cross-encoder: refused in one line
CE_RETIRED = (
    "the cross-encoder selector was retired (the learned ranker beat it everywhere): serve a ranker, e.g. models/ranker"
)


def resolve(spec: dict | str | Path, backend: str = "auto") -> Selector:
    """The one way to a selector, for the service, eval, deploy and the CLI: a version record (the registry's
    `eval.registry.record_of`, an export's `selector.json`), or a name or path that stands for one
    (`path_record`). `backend` for a GGUF: `auto` is Ollama when reachable and it has the tag, else llama.cpp
    in-process on the same file."""
    return _from_record(spec if isinstance(spec, dict) else path_record(spec), backend)


def path_record(name: str | Path) -> dict:
    """The record a name or path stands for: `first-stage` (or its old name); a trained LLM folder (train stage
    output, run by transformers); a ranker folder; an export folder or its `selector.json` (run as served); a bare `.gguf`.
    A retired cross-encoder's folder stands for its record, which `resolve` refuses (`CE_RETIRED`)."""
    path = Path(name)
    if current_name(str(name)) == FIRST_STAGE:  # or its old name
        return dict(FIRST_STAGE_RECORD)
    if path.is_dir() and (path / "train_config.json").exists():
        return {"kind": "transformers", "model_dir": str(path), "version": f"transformers:{path.name}"}
    for kind, (config, prefix) in FOLDER_KINDS.items():
        if path.is_dir() and (path / config).exists():
            return {"kind": kind, "model_dir": str(path), "version": f"{prefix}:{path.name}"}
    if path.is_dir() and (path / "ce_config.json").exists():
        return {"kind": "cross_encoder", "model_dir": str(path), "version": f"ce:{path.name}"}
    if path.is_dir() and (path / "selector.json").exists():
        path = path / "selector.json"
    if path.suffix == ".json" and path.is_file():
        return json.loads(path.read_text())
    if path.suffix == ".gguf" and path.is_file():
        return {"version": f"gguf:{path.stem}", "gguf": str(path), "chunk_tokens": 200}
    raise ValueError(
        f"unknown selector {str(name)!r} (first-stage, a trained model folder such as models/selector or models/ranker, "
        "an export folder such as models/export, or a .gguf file)"
    )


def _from_record(record: dict, backend: str) -> Selector:
    record = current_record(record)  # a record stored before the first stage's order was renamed
    if record.get("kind") == FIRST_STAGE:
        return FirstStageSelector()
    if record.get("kind") == "cascade":
        return CascadeSelector(_from_record(record["fast"], backend), _from_record(record["slow"], backend))
    if record.get("kind") == "transformers":
        return TransformersSelector(Path(record["model_dir"]))
    if record.get("kind") == "cross_encoder":
        raise SelectorLoadError(f"{record.get('version', 'cross-encoder')}: {CE_RETIRED}")
    if record.get("kind") == "ranker":
        if not Path(record.get("model_dir", "")).is_dir():
            raise SelectorLoadError(f"ranker model not found: {record.get('model_dir')}")
        return RankerSelector(Path(record["model_dir"]), record["version"])
    try:
        version, gguf, chunk_tokens = record["version"], Path(record["gguf"]), int(record["chunk_tokens"])
    except (KeyError, TypeError, ValueError) as e:
        raise SelectorLoadError(f"version record lacks {e}") from e
    n_ctx = int(record.get("num_ctx", 4096))
    if backend == "ollama" or (backend == "auto" and record.get("ollama_tag") and ollama_reachable()):
        try:
            return OllamaSelector(record["ollama_tag"], version, chunk_tokens, n_ctx=n_ctx)
        except SelectorLoadError:
            if backend == "ollama":
                raise
    if backend not in ("auto", "llamacpp", "ollama"):
        raise SelectorLoadError(f"unknown backend {backend!r} (auto, ollama, llamacpp)")
    return LlamaCppSelector(gguf, version, chunk_tokens, n_ctx=n_ctx)
