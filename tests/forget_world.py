"""A store with a note holding a unique marker, copied to every place a forget must reach: ingested (rows, vectors,
the vector cache), served (a staging file, the query log), cited (the answer quotes it), pulled (feedback.jsonl),
built into training data (train/val/pairs JSONL), cached by DVC (the files' copies under .dvc/cache) and logged to
MLflow (an artifact). Shared by the forget tests of retrieval and cli."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from retrieval.corpus.ingest import ingest_documents
from retrieval.corpus.sources import Document
from retrieval.logs.feedback import log_query, record_feedback
from retrieval.params import ForgetParams, IngestParams, SearchParams, UsedParams
from retrieval.query import staging
from retrieval.query.search import search
from training.build import BuildParams, build_examples
from training.pull import PullParams, pull

MARKER = "quokka-vault-4417"
NOTES = {
    "note:marker": f"# Shed\n\nThe garden shed padlock code is {MARKER}, changed every spring.\n",
    "note:bees": "# Bees\n\nHoney bees collect nectar from flowers and store it as honey in wax combs.\n",
    "note:rivers": "# Rivers\n\nRivers carry fresh water from mountains down to the sea, shaping valleys.\n",
    "note:stars": "# Stars\n\nStars fuse hydrogen into helium in their cores and shine for billions of years.\n",
}
QUERIES = (  # (query, the note its answer cites, the answer)
    ("what is the garden shed padlock code?", "note:marker", f"The padlock code is {MARKER} [1]."),
    ("how do bees make honey?", "note:bees", "Bees store nectar as honey in wax combs [1]."),
    ("where do rivers carry water?", "note:rivers", "Rivers carry water down to the sea [1]."),
    ("what do stars fuse?", "note:stars", "Stars fuse hydrogen into helium [1]."),
)
SP = SearchParams(threshold=0.0)


@dataclass
class World:
    root: Path
    home: Path
    staging: Path
    feedback: Path
    datasets: Path
    dvc_cache: Path
    fp: ForgetParams
    docs: dict[str, int]  # source -> document id
    queries: dict[str, int]  # query -> query id


def ingest(conn, embedder, scope: str = "default", notes: dict[str, str] = NOTES) -> dict[str, int]:
    docs = [Document(s, "webhook:", t, "markdown") for s, t in notes.items()]
    ingest_documents(conn, docs, IngestParams(), SP, embedder, scope)
    return dict(conn.execute("SELECT source, id FROM documents WHERE scope = %s", (scope,)).fetchall())


def serve_and_cite(conn, embedder, st: Path, scope: str = "default") -> dict[str, int]:
    """Each query searched, its staging file written, logged with what was shown, its answer citing [1]."""
    out = {}
    for text, cited, answer in QUERIES:
        r = search(conn, embedder, text, SP)
        top = r.above[0]
        assert top.source == cited, (text, top.source)  # the world is built as the test reads it
        path = staging.write(staging.from_result(r, scope=scope, context=[1, 2, 3]), st)
        qid = log_query(
            conn, text, r.above, "first-stage", shown=[1, 2, 3], staging_path=str(path), threshold=0.0, scope=scope
        )
        record_feedback(conn, qid, answer=answer, rating=1)
        out[text] = qid
    return out


def build_files(conn, db_url: str, feedback: Path, datasets: Path) -> None:
    """The pull's export, then build's training data, as the pipeline writes them."""
    conn.execute("UPDATE queries SET updated_at = now() - interval '1 minute'")  # past the pull's lag
    pull(PullParams(out=str(feedback), lag_seconds=0), url=db_url)
    records = [json.loads(line) for line in open(feedback / "feedback.jsonl")]
    splits, pairs, _ = build_examples(records, BuildParams(val_fraction=0.5, include_empty=True), UsedParams())
    datasets.mkdir(parents=True, exist_ok=True)
    for name, rows in {**splits, "pairs": pairs}.items():
        (datasets / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def dvc_cache_copy(cache: Path, *files: Path) -> list[Path]:
    """Each file copied into a DVC-style cache (files/md5/ab/cdef...), as `dvc commit` stores it."""
    out = []
    for f in files:
        md5 = hashlib.md5(f.read_bytes()).hexdigest()
        dest = cache / "files" / "md5" / md5[:2] / md5[2:]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
        out.append(dest)
    return out


def make_world(conn, db_url: str, embedder, root: Path) -> World:
    """The world, under `root` (PAI_HOME must be root / 'home' already, for the vector cache)."""
    home, st = root / "home", root / "staging"
    feedback, datasets, cache = root / "data" / "feedback", root / "data" / "datasets", root / ".dvc" / "cache"
    docs = ingest(conn, embedder)
    queries = serve_and_cite(conn, embedder, st)
    build_files(conn, db_url, feedback, datasets)
    dvc_cache_copy(cache, feedback / "feedback.jsonl", datasets / "train.jsonl", datasets / "val.jsonl")
    artifacts = home / "mlartifacts" / "1" / "run1" / "artifacts"
    artifacts.mkdir(parents=True)
    shutil.copyfile(datasets / "train.jsonl", artifacts / "train.jsonl")  # a logged dataset
    (artifacts / "train_config.json").write_text(json.dumps({"base_model": "tiny"}))  # holds nothing of it
    fp = ForgetParams(pipeline=f"{feedback},{datasets}", dvc_cache=str(cache))
    return World(root, home, st, feedback, datasets, cache, fp, docs, queries)
