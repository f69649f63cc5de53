"""Forget's file side: every place outside the database a memory's text is copied to, listed once (`places`), and
what a forget does to each (`scrub`) and what `pai forget --verify` reads in each (`verify`).

How each kind of place loses it:
- `staging`: a staging file listing a forgotten chunk keeps its place in the list, with the text, source and headings
  replaced by `[forgotten]`; a forgotten text in the query, in the file name too.
- `pipeline`: the pull's `feedback.jsonl` keeps each query's record, the forgotten candidates' texts and labels
  dropped (as the log's rows), the answer and correction of a query that showed one; any other JSONL (training
  data) drops the lines of the queries that held it; any other file holding it goes.
- `content`: content-addressed copies (DVC's cache and a local remote, MLflow's artifacts) cannot be rewritten:
  a file holding it, or a JSONL holding a record of a query that held it, goes.
- `vectors`: the vector cache's entries of the forgotten passages go (it holds no text, only sha256 keys).
- `sqlite`: read by `verify` only (MLflow's store of runs, params and tags).
"""

from __future__ import annotations

import configparser
import json
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg

from ..db import pai_home
from ..embed import DIM, MODEL_ID
from ..embedding_cache import EmbeddingCache
from ..files import write_atomic
from ..logs.feedback_records import FEEDBACK_FILE, WORKSPACES
from ..params import ForgetParams
from ..query import staging
from .forget_log import FORGOTTEN

MAX_BYTES = 1 << 30  # a file larger than this is not read (a model's weights): said so by verify
_CHUNK_ID = re.compile(r'"chunk_id": (\d+)')


@dataclass(frozen=True)
class Place:
    name: str  # what a person reads
    path: Path  # a folder, or one file
    kind: str  # staging | pipeline | content | vectors | sqlite (the module docstring)


def places(
    fp: ForgetParams, staging_dir: Path, remote: bool = False, home: Path | None = None, store: str | None = None
) -> list[Place]:
    """Every place outside the database where a memory's text may be copied: the one list forget and verify read.
    With `store` (this database's id), also the pipeline files parked for it while the checkout held another
    store's (`pai retrain`'s workspaces: WORKSPACES/<store>/<the same folders>)."""
    home = home or pai_home()
    out = [Place("staging files", staging_dir, "staging")]
    out += [Place(f"pipeline files {d}", d, "pipeline") for d in fp.pipeline_dirs()]
    if store:
        out += [
            Place(f"parked pipeline files {d}", Path(WORKSPACES) / store / d, "pipeline") for d in fp.pipeline_dirs()
        ]
    out.append(Place("DVC cache", Path(fp.dvc_cache), "content"))
    if remote:
        out += [Place(f"DVC remote {url}", Path(url), "content") for url in dvc_local_remotes(Path(fp.dvc_cache))]
    out.append(Place("MLflow artifacts", home / "mlartifacts", "content"))
    out.append(Place("MLflow store", home / "mlflow.db", "sqlite"))
    out.append(Place("vector cache", home / "embeddings.sqlite", "vectors"))
    return out


def dvc_local_remotes(cache: Path) -> list[str]:
    """The folders of the DVC remotes that are local paths (`.dvc/config` beside the cache); a cloud remote is not
    reachable from here (`dvc gc --cloud` after a forget)."""
    config = configparser.ConfigParser()
    config.read([cache.parent / "config", cache.parent / "config.local"])
    out = []
    for section in config.sections():
        url = config[section].get("url", "") if section.strip("'").startswith("remote ") else ""  # ['remote "x"']
        if url and ("://" not in url or url.startswith("file://")):
            path = Path(url.removeprefix("file://"))
            out.append(str(path if path.is_absolute() else (cache.parent / path).resolve()))
    return out


@dataclass(frozen=True)
class Job:
    """What the files must lose (a journal row's `job`)."""

    chunk_ids: frozenset[int]
    query_ids: frozenset[int]  # their pulled records (and any copy) hold it
    trained_query_ids: frozenset[int]  # their training examples hold it
    answer_query_ids: frozenset[int]  # their answers and corrections went
    texts: tuple[str, ...]
    cache_keys: tuple[bytes, ...]
    staging_paths: frozenset[str]
    global_texts: bool  # a text is removed from every file (the owner's forget), not only the queries' records

    @classmethod
    def of(cls, job: dict) -> Job:
        return cls(
            frozenset(job.get("chunk_ids", ())),
            frozenset(job.get("query_ids", ())),
            frozenset(job.get("trained_query_ids", ())),
            frozenset(job.get("answer_query_ids", ())),
            tuple(job.get("texts", ())),
            tuple(bytes.fromhex(k) for k in job.get("cache_keys", ())),
            frozenset(job.get("staging_paths", ())),
            bool(job.get("global_texts", True)),
        )

    def holds(self, text: str | None) -> bool:
        return bool(text) and any(t in text for t in self.texts)

    def strip(self, text: str | None) -> str | None:
        for t in self.texts:
            text = text.replace(t, FORGOTTEN) if text else text
        return text


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file() and ".git" not in p.relative_to(path).parts)


def scrub(
    places: list[Place], job: Job, progress: Callable[[str], None] | None = None
) -> tuple[dict[str, int], dict[str, str]]:
    """Every place made to lose `job`'s data; (place -> files changed or removed, vectors deleted; staging files
    renamed, old path -> new)."""
    counts, renamed = {}, {}
    for place in places:
        if progress:
            progress(place.name)
        if place.kind == "staging":
            counts[place.name], renamed = _staging(place.path, job)
        elif place.kind == "pipeline":
            counts[place.name] = sum(_pipeline_file(p, job) for p in _files(place.path))
        elif place.kind == "content":
            counts[place.name] = sum(_content_file(p, job) for p in _files(place.path))
        elif place.kind == "vectors" and place.path.is_file() and job.cache_keys:
            counts[place.name] = EmbeddingCache(place.path, MODEL_ID, DIM).forget(list(job.cache_keys))
    return counts, renamed


def _staging(directory: Path, job: Job) -> tuple[int, dict[str, str]]:
    n, renamed, changed = 0, {}, []
    for path in _files(directory):
        if not path.name.endswith(".md"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        ids = {int(i) for i in _CHUNK_ID.findall(text)}
        if not (str(path) in job.staging_paths or ids & job.chunk_ids or (job.global_texts and job.holds(text))):
            continue
        try:
            sf = staging.parse(text)
        except (staging.StagingParseError, ValueError, TypeError):
            path.unlink()  # not a file this version can rewrite, and it holds what was forgotten
            changed.append(path)
            n += 1
            continue
        cands = tuple(
            replace(c, text=FORGOTTEN, source=FORGOTTEN, heading=None, parent_heading=None, content_hash="forgotten")
            if c.chunk_id in job.chunk_ids or job.holds(c.text) or job.holds(c.source)
            else c
            for c in sf.candidates
        )
        write_atomic(path, staging.render(replace(sf, query=job.strip(sf.query), candidates=cands)))
        changed.append(path)
        if job.holds(path.name) or any(_slug(t) and _slug(t) in path.name for t in job.texts):
            new = path.with_name(_rename(path.name, job))
            path.replace(new)
            renamed[str(path)] = str(new)
        n += 1
    if changed and (directory / ".git").is_dir():  # staging.git: the next commit no longer holds it (history does)
        git = ["git", "-C", str(directory), "-c", "user.name=pai", "-c", "user.email=pai@localhost"]
        subprocess.run([*git, "add", "-A", "."], check=False, capture_output=True)
        subprocess.run([*git, "commit", "-q", "-m", "pai forget"], check=False, capture_output=True)
    return n, renamed


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _rename(name: str, job: Job) -> str:
    for t in job.texts:
        name = name.replace(t, "forgotten")
        if _slug(t):
            name = name.replace(_slug(t), "forgotten")
    return name


def _query_id(rec: object) -> int | None:
    if not isinstance(rec, dict):
        return None
    meta = rec.get("meta")
    return rec.get("query_id", meta.get("query_id") if isinstance(meta, dict) else None)


def _pipeline_file(path: Path, job: Job) -> int:
    if path.name.endswith(".tmp"):
        return 0
    if path.name == FEEDBACK_FILE:
        return _feedback_file(path, job)
    if path.suffix == ".jsonl":
        return _jsonl_file(path, job)
    return _content_file(path, job)


def _feedback_file(path: Path, job: Job) -> int:
    lines, changed = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("query_id") in job.query_ids or (job.global_texts and job.holds(line)):
            rec = _forget_record(rec, job)
            changed = True
        lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
    if changed:
        write_atomic(path, "".join(lines))
    return int(changed)


def _forget_record(rec: dict, job: Job) -> dict:
    """A pulled record without what was forgotten: as the log's rows now read."""
    gone = {"source": None, "heading": None, "parent_heading": None, "text": None, "used": None}
    cands = [
        c | gone | {"content_hash": "forgotten"}
        if c.get("chunk_id") in job.chunk_ids or job.holds(c.get("text")) or job.holds(c.get("source"))
        else c
        for c in rec.get("candidates", [])
    ]
    out = rec | {"candidates": cands, "query": job.strip(rec.get("query"))}
    if rec.get("query_id") in job.answer_query_ids:
        return out | {"answer": None, "correction": None}
    return out | {"answer": job.strip(rec.get("answer")), "correction": job.strip(rec.get("correction"))}


def _jsonl_file(path: Path, job: Job) -> int:
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            qid = _query_id(json.loads(line))
        except json.JSONDecodeError:
            qid = None
        if qid in job.trained_query_ids or (job.global_texts and job.holds(line)):
            dropped += 1
        else:
            kept.append(line)
    if dropped:
        write_atomic(path, "".join(kept))
    return int(bool(dropped))


def _content_file(path: Path, job: Job) -> int:
    """A copy that cannot be rewritten (its name is its content's hash): removed when it holds the forgotten data."""
    if path.stat().st_size > MAX_BYTES:
        return 0
    data = path.read_bytes()
    hit = job.global_texts and any(_needle_in(data, t) for t in job.texts)
    if not hit and job.query_ids and b'"query_id": ' in data:
        for line in data.splitlines():
            try:
                if _query_id(json.loads(line)) in job.query_ids:
                    hit = True
                    break
            except (json.JSONDecodeError, UnicodeDecodeError):
                break  # not JSONL
    if hit:
        path.unlink()
    return int(hit)


def _needle_in(data: bytes, text: str) -> bool:
    """`text` in a file as written raw or inside JSON (escaped, with or without ASCII escapes)."""
    forms = {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return any(f.encode("utf-8", "surrogatepass") in data for f in forms if f)


@dataclass(frozen=True)
class Trace:
    place: str
    where: str  # a file, a table


def verify(conn: psycopg.Connection, text: str, places: list[Place]) -> list[Trace]:
    """Every trace of `text` left in the database's tables and in `places` (none: it is forgotten everywhere)."""
    if not text:
        raise ValueError("--verify needs a text to look for")
    out = []
    tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    # a row as text doubles quotes and backslashes; a jsonb value escapes them as JSON does
    forms = sorted({text, text.replace("\\", "\\\\").replace('"', '""'), json.dumps(text)[1:-1]})
    for t in sorted(tables):
        (n,) = conn.execute(
            f'SELECT count(*) FROM "{t}" t WHERE EXISTS (SELECT 1 FROM unnest(%s::text[]) f WHERE strpos(t::text, f) > 0)',
            (forms,),
        ).fetchone()
        if n:
            out.append(Trace("database", f"table {t}: {n} row(s)"))
    for place in places:
        for path in _files(place.path):
            if path.stat().st_size > MAX_BYTES:
                continue
            data = path.read_bytes()
            if _needle_in(data, text) or (place.kind == "staging" and _slug(text) and _slug(text) in path.name):
                out.append(Trace(place.name, str(path)))
        if place.kind == "staging" and (place.path / ".git").is_dir() and _in_git_history(place.path, text):
            out.append(Trace(place.name, f"{place.path}/.git: the staging history (staging.git)"))
    return out


def _in_git_history(directory: Path, text: str) -> bool:
    log = subprocess.run(
        ["git", "-C", str(directory), "log", "--all", "-p", "--no-color"], capture_output=True, check=False
    ).stdout
    return _needle_in(log, text)
