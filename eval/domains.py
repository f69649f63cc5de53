"""The day-one domain set (`pai lab bench build-domains`): judged sets from several domains, each a contract-5 file
(`{"qid", "query", "candidates": [{"id", "title"?, "text"}], "relevant_ids"}`), on which the orders a store
serves before any feedback (the first stage's fusion, the ranker's general weights) are held to the best of
cosine, BM25 and their reciprocal-rank fusion (`pai lab bench general --domains`). Sources, licences and each
set's weakness: docs/domains.md. Generated, never committed.

Mined sets take every judged passage of a query plus distractors found by a hybrid first stage (cosine top
4n and BM25 top 4n over the whole pool, fused by reciprocal rank), so the distractors are the ones retrieval
would really hand over, in cosine order.
"""

from __future__ import annotations

import json
import random
import re
import sysconfig
from collections.abc import Callable
from pathlib import Path

import numpy as np

from retrieval.contracts.passage import passage_text
from retrieval.embed import Embedder
from retrieval.query.order import rrf

from . import code_bench, man_bench

Passage = tuple[str, str | None, str]  # (id, title, text)
Query = tuple[str, str, list[str]]  # (qid, query, relevant passage ids)
DPKG_STATUS = Path("/var/lib/dpkg/status")
JUDGED = Path(__file__).resolve().parents[1] / "data" / "judged"
_EVIDENCE = re.compile(r"D(\d+):0*(\d+)")


def mine(passages: list[Passage], queries: list[Query], embedder: Embedder, n: int = 20, progress=None) -> list[dict]:
    """Contract-5 items: each query's relevant passages and n - (their number) distractors mined over the pool."""
    import bm25s  # heavy (numba, scipy): only when a set is built

    texts = [passage_text(t, x) for _, t, x in passages]
    vecs = np.concatenate([embedder.encode_passages(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    where = {pid: i for i, (pid, _, _) in enumerate(passages)}
    items = []
    for qid, query, relevant in queries:
        rel = [where[r] for r in dict.fromkeys(relevant) if r in where][: n - 1]
        if not rel:
            continue
        q = embedder.encode([query])[0]
        dense = list(np.argsort(-(vecs @ q))[: 4 * n])
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        sparse = []
        if tokens.vocab:  # a query of stopwords only has no keyword side
            docs, _ = index.retrieve(tokens, k=min(4 * n, len(texts)), show_progress=False)
            sparse = [int(i) for i in docs[0]]
        mined = [int(i) for i in rrf([dense, sparse], 60) if i not in rel][: n - len(rel)]
        cands = sorted([*rel, *mined], key=lambda i: -float(vecs[i] @ q))
        items.append(
            {
                "qid": qid,
                "query": query,
                "candidates": [{"id": passages[i][0], "title": passages[i][1], "text": passages[i][2]} for i in cands],
                "relevant_ids": [passages[i][0] for i in rel],
            }
        )
        if progress:
            progress()
    return items


def scifact(embedder: Embedder, queries: int, seed: int, progress=None) -> list[dict]:
    """SciFact test claims (all 300) over the whole corpus of 5,183 abstracts."""
    root = JUDGED / "scifact"
    passages = [(d["_id"], d.get("title"), d["text"]) for d in map(json.loads, open(root / "corpus.jsonl"))]
    text = {q["_id"]: q["text"] for q in map(json.loads, open(root / "queries.jsonl"))}
    rel: dict[str, list[str]] = {}
    for line in open(root / "qrels" / "test.tsv"):
        qid, did, *_ = line.split("\t")
        if qid in text:
            rel.setdefault(qid, []).append(did)
    return mine(passages, [(q, text[q], r) for q, r in rel.items()][:queries], embedder, progress=progress)


def hotpotqa(embedder: Embedder, queries: int, seed: int, progress=None) -> list[dict]:
    """HotpotQA test as shipped (10 paragraphs a question: 2 gold, 8 distractors)."""
    return [json.loads(line) for line in open(JUDGED / "hotpotqa" / "test.jsonl")][:queries]


def turn_text(turn: dict) -> str:
    """A conversation turn as a document: the speaker's words, and the caption of a photo they shared."""
    caption = f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
    return f"{turn['speaker']}: {turn['text']}{caption}"


def conversation(path: Path) -> tuple[list[Passage], list[Query]]:
    """One LoCoMo conversation: its turns (one document each) and its questions with evidence (categories 1-4)."""
    conv = json.loads(path.read_text(encoding="utf-8"))
    passages = []
    for key, turns in conv.items():
        if re.fullmatch(r"session_\d+", key):
            date = conv.get(f"{key}_date_time", "")
            passages += [(f"{path.stem}:{t['dia_id']}", date, turn_text(t)) for t in turns]
    out = []
    for n, qa in enumerate(conv["qa"]):
        evidence = [f"{path.stem}:D{s}:{t}" for e in qa.get("evidence", []) for s, t in _EVIDENCE.findall(e)]
        if qa.get("category") in (1, 2, 3, 4) and evidence:
            out.append((f"{path.stem}:q{n}", qa["question"], evidence))
    return passages, out


def locomo(embedder: Embedder, queries: int, seed: int, progress=None) -> list[dict]:
    """LoCoMo's questions over their own conversation's turns (each conversation is its own store)."""
    items = []
    for path in sorted((JUDGED / "locomo").glob("conv-*.json")):
        passages, qs = conversation(path)
        items += mine(passages, qs, embedder, progress=progress)
    return items[:queries]


def sampled(pool: list[tuple[str, str, str]], embedder: Embedder, queries: int, seed: int, progress) -> list[dict]:
    """A pool of (id, query, passage), each passage its own query's one relevant one: `queries` sampled."""
    picked = random.Random(seed).sample(range(len(pool)), min(queries, len(pool)))
    return mine(
        [(i, None, p) for i, _, p in pool],
        [(pool[k][0], pool[k][1], [pool[k][0]]) for k in picked],
        embedder,
        20,
        progress,
    )


def code(embedder: Embedder, queries: int, seed: int, progress=None) -> list[dict]:
    """Docstring first sentences -> function bodies of ten installed packages (`eval.code_bench`)."""
    root = Path(sysconfig.get_paths()["purelib"])
    pool, seen = [], set()
    for name in code_bench.PACKAGES:
        for fid, query, body in code_bench.functions(root / name) if (root / name).is_dir() else []:
            if body not in seen and query.lower() not in seen:
                seen.update((body, query.lower()))
                pool.append((fid, query, body))
    return sampled(pool, embedder, queries, seed, progress)


def man(embedder: Embedder, queries: int, seed: int, progress=None) -> list[dict]:
    """whatis lines -> DESCRIPTION sections of the manual pages (`eval.man_bench`)."""
    pool, seen = [], set()
    root = Path("/usr/share/man")
    pages = [p for d in man_bench.SECTIONS if (root / d).is_dir() for p in (root / d).iterdir()]
    for path in sorted(
        p for p in pages if p.is_file() and not p.is_symlink() and not p.name.startswith(man_bench.SKIP)
    ):
        got = man_bench.page(path)
        if got is not None and got[1].lower() not in seen and got[2] not in seen:
            seen.update((got[1].lower(), got[2]))
            pool.append((f"{path.parent.name}/{path.name}", got[1], got[2]))
    return sampled(pool, embedder, queries, seed, progress)


def dpkg_packages(status: Path = DPKG_STATUS) -> list[tuple[str, str, str]]:
    """(package, synopsis, long description) of each installed Debian package with a description of 150+ chars."""
    out, seen = [], set()
    for block in status.read_text(encoding="utf-8", errors="replace").split("\n\n"):
        name = re.search(r"^Package: (\S+)", block, re.M)
        desc = re.search(r"^Description: (.*)\n((?: .*\n?)*)", block, re.M)
        if not (name and desc):
            continue
        body = " ".join(line.strip() for line in desc.group(2).splitlines() if line.strip() != ".")
        synopsis = desc.group(1).strip()
        if len(body) >= 150 and len(synopsis.split()) >= 3 and body not in seen and synopsis.lower() not in seen:
            seen.update((body, synopsis.lower()))
            out.append((name.group(1), synopsis, body[:1200]))
    return out


def dpkg(embedder: Embedder, queries: int, seed: int, progress=None) -> list[dict]:
    """Debian package synopses -> their long descriptions (the packages installed on this machine)."""
    return sampled(dpkg_packages(), embedder, queries, seed, progress)


BUILDERS: dict[str, Callable[..., list[dict]]] = {
    "scifact": scifact,
    "hotpotqa": hotpotqa,
    "code": code,
    "man": man,
    "locomo": locomo,
    "dpkg": dpkg,
}


def build(names: list[str], out: Path, embedder: Embedder, queries: int, seed: int, bar=None) -> dict[str, int]:
    """Write `out/<name>.jsonl` for each domain; the number of queries of each."""
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        raise ValueError(f"unknown domain {', '.join(unknown)}: one of {', '.join(BUILDERS)}")
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name in names:
        progress = None
        if bar:
            progress = lambda t=bar.add_task(f"{name}: mine candidates", total=queries): bar.advance(t)  # noqa: E731
        items = BUILDERS[name](embedder, queries, seed, progress)
        code_bench.write(items, out / f"{name}.jsonl")
        counts[name] = len(items)
    return counts
