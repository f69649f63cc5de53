"""Answers a model gave, kept on disk so a second run on the same inputs does not ask again: one JSON line per
answer, keyed by a digest of everything the answer depends on (the caller says what: the model file's digest, the
rendered prompt, the decoding budget). Append-only: a crash keeps every line before it, and a line cut short is
asked again. Used for the LLM chain's base model (`eval.base_llm`) and the reader (`eval.reader`): neither changes
between cycles, so every cycle after the first reads them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


class AnswerCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.answers: dict[str, str] = {}
        self.hits = self.misses = 0
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.answers[str(row["key"])] = str(row["text"])
                except (ValueError, KeyError, TypeError):  # a line cut short by a crash: asked again
                    continue

    @staticmethod
    def key(*what) -> str:
        """The digest of what an answer depends on (JSON-serialisable parts)."""
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()

    def get(self, key: str) -> str | None:
        text = self.answers.get(key)
        if text is None:
            self.misses += 1
        else:
            self.hits += 1
        return text

    def put(self, key: str, text: str) -> None:
        self.answers[key] = text
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:  # one line per answer: a crash keeps those before it
            f.write(json.dumps({"key": key, "text": text}) + "\n")
