"""False positives of the secret scrubber on real prose and code: `pai bench scrub`.

Prose: the SciFact corpus (5K biomedical abstracts: numbers, gene names, DOIs, accession ids);
every whitespace token the scrubber changes is counted. Code: this repository's own .py files
(tests aside: they hold synthetic secrets on purpose); every line it changes is counted and shown.
"""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.scrub import scrub

SKIP = {".venv", ".git", "tests", "__pycache__", ".pai", ".dvc"}


def changed_tokens(before: str, after: str) -> int:
    """Tokens of `before` that the scrubber altered (lines keep their count, tokens are compared per line)."""
    n = 0
    for a, b in zip(before.split("\n"), after.split("\n")):
        if a != b:
            kept = set(b.split())
            n += sum(t not in kept for t in a.split())
    return n


def measure(corpus: Path, repo: Path) -> dict:
    docs = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8") if line.strip()]
    tokens = changed = docs_changed = 0
    prose_examples = []
    for text in docs:
        out = scrub(text).text
        tokens += len(text.split())
        if out != text:
            docs_changed += 1
            changed += changed_tokens(text, out)
            prose_examples.append(out[:200])
    files = sorted(p for p in repo.rglob("*.py") if not SKIP & set(p.relative_to(repo).parts))
    lines = lines_changed = 0
    code_examples = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        out = scrub(text).text
        lines += text.count("\n") + 1
        for i, (a, b) in enumerate(zip(text.split("\n"), out.split("\n")), start=1):
            if a != b:
                lines_changed += 1
                code_examples.append(f"{f.relative_to(repo)}:{i}: {b.strip()[:160]}")
    return {
        "prose": {
            "corpus": str(corpus),
            "documents": len(docs),
            "documents_changed": docs_changed,
            "tokens": tokens,
            "tokens_changed": changed,
            "examples": prose_examples[:20],
        },
        "code": {"files": len(files), "lines": lines, "lines_changed": lines_changed, "examples": code_examples[:50]},
    }


def summary(m: dict) -> list[str]:
    """The measurement as lines: the rates, then examples of what changed."""
    p, c = m["prose"], m["code"]
    return [
        f"prose: {p['documents_changed']} of {p['documents']:,} SciFact abstracts changed; "
        f"{p['tokens_changed']} of {p['tokens']:,} tokens ({p['tokens_changed'] / max(p['tokens'], 1):.4%})",
        f"code:  {c['lines_changed']} of {c['lines']:,} lines in {c['files']} .py files changed ({c['lines_changed'] / max(c['lines'], 1):.4%})",
        *(f"  {e}" for e in p["examples"] + c["examples"]),
    ]
