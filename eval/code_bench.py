"""A lexical-mismatch benchmark built from material on this machine: code search, natural-language query ->
function (`pai lab bench build-code`).

The Python packages installed beside pai-brain hold thousands of documented functions. Each query is the
first sentence of a function's docstring; its relevant passage is that function's source *with the
docstring removed* (what a developer's memory holds: code, named in its own jargon). The other 19
candidates are mined by our own hybrid first stage (cosine over MiniLM vectors + BM25, fused by
reciprocal rank, as the service's first stage) over all the pooled functions, so the distractors are
the ones retrieval would really hand the selector. Written as contract-5 JSONL (`{"qid", "query",
"candidates": [{"id", "text"}], "relevant_ids"}`), generated, never committed.
"""

from __future__ import annotations

import ast
import json
import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console

from retrieval.contracts.lexical import lexical_scores
from retrieval.embed import Embedder, get_embedder
from retrieval.files import write_atomic
from retrieval.params import load_section
from retrieval.query.order import rrf


@dataclass(frozen=True)
class CodeBenchParams:
    """The code_bench stage: a code-search set built from this machine (docstring-style queries against functions), out
    of domain, where BM25 is weak."""

    out: str = "data/benchmarks/code-docstrings.jsonl"
    """docstring's first sentence -> its function's body (docstring removed), 19 mined distractors"""
    queries: int = 300
    """functions sampled as queries (of ~1,300 documented ones in the installed packages it reads)"""
    seed: int = 0
    """the seed that draws the code-search queries"""

    def problems(self) -> list[str]:
        return [] if self.queries >= 1 else ["code_bench: need queries >= 1"]


PACKAGES = ("requests", "httpx", "click", "jinja2", "yaml", "dateutil", "attr", "rich", "typer", "psycopg")
MIN_WORDS, MAX_CHARS = 6, 1200


def first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]


def functions(root: Path) -> list[tuple[str, str, str]]:
    """(id, query, body without its docstring) of every documented function under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        lines = source.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc or len(first_sentence(doc).split()) < MIN_WORDS:
                continue
            first = node.body[0]  # the docstring expression: cut its lines out of the body
            body = lines[node.lineno - 1 : first.lineno - 1] + lines[first.end_lineno : node.end_lineno]
            text = "\n".join(body).strip()
            if len(node.body) < 2 or len(text) < 80:
                continue
            out.append((f"{path.relative_to(root.parent)}:{node.lineno}", first_sentence(doc), text[:MAX_CHARS]))
    return out


def build(
    site_packages: Path, embedder: Embedder, queries: int, n: int = 20, seed: int = 0, progress=None
) -> list[dict]:
    pool, seen = [], set()
    for name in PACKAGES:
        if (site_packages / name).is_dir():
            for fid, query, body in functions(site_packages / name):
                if (
                    body not in seen and query.lower() not in seen
                ):  # one copy of an overloaded body or a shared docstring
                    seen.update((body, query.lower()))
                    pool.append((fid, query, body))
    if len(pool) < n:
        raise ValueError(f"only {len(pool)} documented functions under {site_packages}: not a benchmark")
    return mine(pool, embedder, queries, n, seed, progress)


def mine(
    pool: list[tuple[str, str, str]], embedder: Embedder, queries: int, n: int = 20, seed: int = 0, progress=None
) -> list[dict]:
    """Contract-5 items from a pool of (id, query, passage): `queries` of them sampled, each with its own passage
    and n - 1 distractors from our hybrid first stage (cosine + BM25 over the whole pool, reciprocal rank fused),
    handed over in cosine order, as retrieval hands candidates to a selector."""
    texts = [b for _, _, b in pool]
    vecs = np.concatenate([embedder.encode_passages(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    picked = random.Random(seed).sample(range(len(pool)), min(queries, len(pool)))
    items = []
    for qi in picked:
        fid, query, _ = pool[qi]
        q = embedder.encode([query])[0]
        dense = list(np.argsort(-(vecs @ q))[: 4 * n])
        lexical = lexical_scores(query, texts)  # BM25 over the whole pool, as a keyword side would
        sparse = list(np.argsort(-np.asarray(lexical))[: 4 * n])
        mined = [int(i) for i in rrf([dense, sparse], 60) if i != qi][: n - 1]
        cands = sorted([qi, *mined], key=lambda i: -float(vecs[i] @ q))  # handed over in cosine order
        items.append(
            {
                "qid": fid,
                "query": query,
                "candidates": [{"id": pool[i][0], "text": pool[i][2]} for i in cands],
                "relevant_ids": [fid],
            }
        )
        if progress:
            progress()
    return items


def write(items: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, "".join(json.dumps(it) + "\n" for it in items))


def main() -> None:
    """Stage `code_bench`: the lexical-mismatch set the deploy gate holds a challenger to, from the packages
    installed beside pai-brain (the same on every machine that installs the same versions)."""
    p = load_section("params.yaml", "code_bench", CodeBenchParams)
    root = Path(sysconfig.get_paths()["purelib"])
    items = build(root, get_embedder(), p.queries, seed=p.seed)
    write(items, Path(p.out))
    Console(stderr=True).print(f"code_bench: {len(items)} queries (docstring -> function body) from {root} -> {p.out}")


if __name__ == "__main__":
    main()
