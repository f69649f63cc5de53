"""Typed views of params.yaml: one frozen dataclass per section, checked once on load; and which params files a
command reads (`params_files`: the rule, written once)."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .db import pai_home

PARAMS = "params.yaml"
SOURCE_ROOT = Path(__file__).resolve().parents[1]  # the folder holding our packages: a checkout, or site-packages

T = TypeVar("T")

# The judged benchmark sets (SciFact, HotpotQA, LoCoMo), shipped compressed in the repository and unpacked in
# place (eval/judged_sets.py), relative to the repository root. Every default in code that reads them starts
# here; params.yaml spells it in benchmark.benchmark_dir and evaluate.benchmarks.
BENCHMARK_DIR = Path("data/judged")


class ParamsError(ValueError):
    """params.yaml is missing, malformed, or has values out of range (all problems in one message)."""


@dataclass(frozen=True)
class EmbedParams:
    """The embedder (all-MiniLM-L6-v2), for every embedding: ingest, search, the ranker. Read by every command that
    embeds."""

    batch_size: int = 32
    """passages per forward pass of all-MiniLM-L6-v2"""
    backend: str = "auto"
    """auto: openvino where installed (faster on CPU: `pai lab bench embed`), else torch (the fp32 reference); or name one"""
    precision: str = "auto"
    """auto: bf16 where the CPU has it natively (AVX512_BF16/AMX); f32: always fp32"""

    def problems(self) -> list[str]:
        out = [] if self.batch_size >= 1 else ["embed.batch_size must be >= 1"]
        if self.backend not in ("auto", "openvino", "torch"):
            out.append("embed.backend must be auto, openvino or torch")
        if self.precision not in ("auto", "f32"):
            out.append("embed.precision must be auto or f32")
        return out


@dataclass(frozen=True)
class IngestParams:
    """How documents become chunks. Read by `pai ingest`, the webhook, the watcher, the git hook and capture."""

    max_file_bytes: int = 5_000_000
    """a file (or one JSONL record) larger than this is refused with a one-line error"""
    chunk_tokens: int = 200
    """target chunk size in approximate tokens (chars / 4); MiniLM reads 256 word pieces"""
    near_threshold: float = 0.75
    """cosine >= this to a chunk of another source: stored with a link to it (near_chunk_id). Only an exact duplicate
    (same heading path and text, whitespace and case aside; code exactly) is skipped"""
    batch_docs: int = 64
    """documents written in one transaction (one per document where it fails)"""
    embed_docs: int = 512
    """documents embedded in one call, their passages sorted by length together so that batches pad little (`pai lab bench
    ingest`)"""
    bulk_max_chunks: int = 50_000
    """a first load into an empty store defers the HNSW and full-text indexes, built at its end or after this many
    chunks (dedup exact in memory meanwhile; `pai lab bench ingest`); 0 = indexes kept throughout"""
    conversation_window: int = 80
    """a chat log's chunk: adjacent turns of one session up to this size, headed by date, session and speakers
    (retrieval/dialogue.py); a question keeps its answer, a sign-off joins its neighbours"""

    def problems(self) -> list[str]:
        out = []
        if self.max_file_bytes < 1:
            out.append("ingest.max_file_bytes must be >= 1")
        if self.chunk_tokens < 16:
            out.append("ingest.chunk_tokens must be >= 16")
        if not 0 < self.near_threshold <= 1:
            out.append("ingest.near_threshold must be a cosine in (0, 1]")
        if not 1 <= self.batch_docs <= self.embed_docs:
            out.append("ingest: need 1 <= batch_docs <= embed_docs")
        if self.bulk_max_chunks < 0:
            out.append("ingest.bulk_max_chunks must be >= 0")
        if not 16 <= self.conversation_window <= self.chunk_tokens:
            out.append("ingest: need 16 <= conversation_window <= chunk_tokens")
        return out


@dataclass(frozen=True)
class SearchParams:
    """The first stage and the context: candidates from PostgreSQL (HNSW fused with full text), their order, and what
    enters the context. Read by `/query`, `pai query`, MCP's search and the benchmark stage."""

    top_k: int = 20
    """candidates written to the staging file for the selector"""
    hnsw_m: int = 16
    """HNSW graph degree (index rebuilt when changed)"""
    hnsw_ef_construction: int = 64
    """HNSW build-time beam width (index rebuilt when changed)"""
    ef_search: int = 100
    """HNSW query-time beam width: recall against latency (`pai lab bench retrieval`)"""
    hybrid: bool = True
    """fuse a keyword side with the vector side by reciprocal rank"""
    keyword: str = "bm25"
    """keyword side: fts (Postgres full text, ts_rank), bm25 (full text's best 2 x top_k re-ranked by BM25 with the store's
    word statistics, retrieval/query/store_bm25.py), trgm (pg_trgm word similarity) or both (fts and trgm)"""
    rrf_k: int = 60
    """reciprocal-rank-fusion constant: score = sum 1 / (rrf_k + rank)"""
    fusion: str = "general"
    """how the fused top_k is ordered: general (retrieval/fusion.py: standardised cosine + BM25 as far as its evidence
    goes, the ranker's general weights' rule; `pai lab bench general --domains`) or rrf (reciprocal rank)"""
    general_bm25: float = 1.0
    """the general order's BM25 weight; with the four knobs below, the one rule of the first stage's order and the
    ranker's general weights (train_ranker's general_bm25, bm25_sd_floor, general_plain_floor, name_ramp and
    rare_ramp are the same numbers)"""
    general_names_floor: float = 0.2
    """the general order's BM25 sd floor for a query that names things (names, acronyms, identifiers, rare words)"""
    general_plain_floor: float = 2.0
    """the general order's BM25 sd floor for a query in plain words: its BM25 keeps its raw size below about one rare
    word's evidence"""
    name_ramp: float = 0.2
    """share of capitalised words after the first at which a query names things (linear below)"""
    rare_ramp: float = 0.3
    """share of the query's words the embedder has no single token for at which a query counts as naming things too (0 =
    not read); fitted leave-one-domain-out by `pai lab bench general --domains data/domains`"""
    threshold: float = 0.2
    """cosine below which a candidate does not enter context beyond min_chunks: it trims the tail, never cuts the
    context below the floor (the best-fused candidates below it top it up)"""
    token_budget: int = 1500
    """context budget in approximate tokens; candidates taken top-down until it is spent"""
    min_chunks: int = 3
    """the budget never cuts the context below this many chunks; a shorter selector pick is topped up to it"""
    explore_rate: float = 0.05
    """share of queries whose last context slot goes to a random candidate below the cut, its propensity logged: what
    lets citations speak for the chunks the order hides (its cost to the context: `pai lab loop report`); 0 = off"""
    previews: int = 5
    """after the context, this many of the next candidates are listed as one-line previews (source, heading, first
    words) that the consumer may read whole (`expand`) and cite: labels below the context's cut (docs/service.md,
    "Previews"); 0 = off"""
    preview_chars: int = 50
    """a preview's length in characters after its [n] (about a quarter as many tokens): the heading and the first words;
    every preview is paid for in every prompt (their cost: docs/measurements.md, "Previews: labels below the cut")"""

    conversation_tokens: int = 830
    """a context that leads with a conversation's chunk is topped up with the next conversation chunks to this many
    tokens (a selector picks 5 chunks; a conversation's are small windows; retrieval/query/shaping.py). 0 = off"""
    conversation_keyword: float = 1.0
    """candidates led by a conversation's chunk are ordered by reciprocal rank of the general order and the keyword
    side, the keyword side at this weight (retrieval/dialogue.py conversation_order); 0 = the general order"""
    conversation_rrf_k: int = 30
    """that fusion's constant: score = 1 / (k + general position) + weight / (k + keyword rank)"""

    def problems(self) -> list[str]:
        out = []
        if not 0 <= self.explore_rate < 1:
            out.append("search.explore_rate must be in [0, 1)")
        if not 0 <= self.previews <= 100 or not 20 <= self.preview_chars <= 1000:
            out.append("search: need previews in 0..100 and preview_chars in 20..1000")
        if not 1 <= self.top_k <= 1000:
            out.append("search.top_k must be in 1..1000")
        if self.hnsw_m < 2 or self.hnsw_ef_construction < 2 * self.hnsw_m:
            out.append("search: need hnsw_m >= 2 and hnsw_ef_construction >= 2 * hnsw_m")
        if not 1 <= self.ef_search <= 1000:
            out.append("search.ef_search must be in 1..1000")
        if self.keyword not in ("fts", "bm25", "trgm", "both"):
            out.append(f"search.keyword must be fts, bm25, trgm or both, not {self.keyword!r}")
        if self.rrf_k < 1:
            out.append("search.rrf_k must be >= 1")
        if self.fusion not in ("general", "rrf"):
            out.append(f"search.fusion must be general or rrf, not {self.fusion!r}")
        if not all(x >= 0 for x in (self.general_bm25, self.general_names_floor, self.general_plain_floor)):
            out.append("search: need general_bm25, general_names_floor and general_plain_floor >= 0")
        if not (0 <= self.name_ramp <= 1 and 0 <= self.rare_ramp <= 1):
            out.append("search: need name_ramp and rare_ramp in [0, 1]")
        if not -1 <= self.threshold <= 1:
            out.append("search.threshold must be a cosine in [-1, 1]")
        if self.token_budget < 1 or self.min_chunks < 0:
            out.append("search: need token_budget >= 1 and min_chunks >= 0")
        if not 0 <= self.conversation_tokens <= self.token_budget:
            out.append("search: need 0 <= conversation_tokens <= token_budget")
        if self.conversation_keyword < 0 or self.conversation_rrf_k < 1:
            out.append("search: need conversation_keyword >= 0 and conversation_rrf_k >= 1")
        return out


@dataclass(frozen=True)
class UsedParams:
    """What counts as a use of a shown chunk, defined once (`retrieval.logs.used.used_labels`): build, train_ranker,
    evaluate's held-out feedback and the trial read the log's labels by it (`pai lab grounding`: what it changes)."""

    min_uncited: float = 0.8
    """a shown chunk holding this share of a sentence the answer left uncited was used (a quote without its [n]); 0 =
    off. Only a near-verbatim quote reaches it, so a consumer that restates loses nothing"""
    void_thumbs_down: bool = True
    """a query rated -1 (its context did not answer it): the citations of its context and previews are not uses (false
    cites that, on-policy, reward the ranker's own misses); a judge's labels outside what the consumer was given stay"""

    def problems(self) -> list[str]:
        return [] if 0 <= self.min_uncited <= 1 else ["used: need min_uncited in [0, 1]"]


@dataclass(frozen=True)
class StagingParams:
    """The staging files: one markdown file per query, the candidates as the selector saw them. Read by `/query`, `pai
    query` and maintenance."""

    dir: str = "staging"
    """one markdown file per query, grouped by day; relative: under $PAI_HOME"""
    git: bool = False
    """make the staging dir a git repo and commit once per query batch"""

    def problems(self) -> list[str]:
        return [] if self.dir else ["staging.dir must be set"]

    def path(self) -> Path:
        """Where staging files go: `dir` as is when absolute, else under $PAI_HOME (retrieval.db.pai_home),
        like every other file the service writes."""
        d = Path(self.dir)
        return d if d.is_absolute() else pai_home() / d


@dataclass(frozen=True)
class MaintainParams:
    """Maintenance: retention, the usage prior, database health, rescrubbing. Read by `pai maintain` and `pai serve`
    (which runs it every interval)."""

    interval_minutes: float = 60.0
    """`pai serve` runs maintenance this often in the background (advisory lock: one service at a time); 0 = off"""
    feedback: str = "data/feedback"
    """the pull stage's folder: feedback newer than its watermark is never deleted"""
    staging_retention_days: int = 30
    """staging files of days older than this are deleted; 0 = keep all"""
    feedback_retention_days: int = 180
    """pulled feedback (queries + candidates) last updated before this is deleted; 0 = keep all"""
    max_gone_fraction: float = 0.5
    """when more than this share of stored files is missing (an unmounted disk?), delete none and warn"""
    usage_prior: bool = True
    """re-order the top_k candidates by chunk usage weights (never adds or drops one; `pai lab bench usage`)"""
    usage_bound: float = 0.1
    """usage weights lie in [-bound, +bound]; a candidate's fused score is multiplied by exp(weight) (set before
    measuring: docs/measurements.md, "Does the usage prior help?")"""
    usage_strength: float = 5.0
    """pseudo-observations that pull a chunk's use rate toward the log's (few observations => weight near 0)"""
    vacuum_dead_fraction: float = 0.1
    """VACUUM (ANALYZE) a table when its dead rows exceed this share of live ones (the HNSW index is rebuilt first, as
    pgvector advises)"""
    recheck_growth: float = 0.2
    """re-check the HNSW index's recall when the chunk count grew by this share since the last check"""
    recheck_queries: int = 100
    """queries of that check, each run through HNSW and as an exact scan"""
    min_recall: float = 0.95
    """recall@top_k below this is reported with the ef_search that reaches it"""
    rescrub_batch: int = 2000
    """documents re-scrubbed per run after the scrubber changed (a rule added); 0 = off"""

    def problems(self) -> list[str]:
        out = []
        if self.interval_minutes < 0 or self.staging_retention_days < 0 or self.feedback_retention_days < 0:
            out.append("maintain: interval_minutes and the retention days must be >= 0 (0 = off)")
        if not self.feedback:
            out.append("maintain.feedback must be set")
        if not 0 < self.max_gone_fraction <= 1:
            out.append("maintain.max_gone_fraction must be in (0, 1]")
        if self.rescrub_batch < 0:
            out.append("maintain.rescrub_batch must be >= 0 (0 = off)")
        if not 0 <= self.usage_bound <= 1 or self.usage_strength <= 0:
            out.append("maintain: need 0 <= usage_bound <= 1 and usage_strength > 0")
        if not 0 < self.vacuum_dead_fraction <= 1 or self.recheck_growth <= 0:
            out.append("maintain: need 0 < vacuum_dead_fraction <= 1 and recheck_growth > 0")
        if self.recheck_queries < 1 or not 0 < self.min_recall <= 1:
            out.append("maintain: need recheck_queries >= 1 and 0 < min_recall <= 1")
        return out


@dataclass(frozen=True)
class ForgetParams:
    """Forget and expiry (`pai forget`, maintenance): where copies of the memory live outside the database, and how long
    a memory lives by default. Read by `pai forget`, `pai ingest` and maintenance."""

    pipeline: str = "data/feedback,data/datasets"
    """the pipeline's folders of files made from the log (the pull's export, build's training data), comma-separated;
    relative: to the working folder"""
    dvc_cache: str = ".dvc/cache"
    """DVC's cache, whose old versions of those files hold what was forgotten; relative: to the working folder"""
    expiry_days: int = 0
    """a memory expires this many days after it was written, unless its scope, its source or `pai ingest --expires`
    says otherwise; 0 = never"""
    expiry_scopes: str = ""
    """per scope, days to live: comma-separated scope=days, e.g. alice/scratch=7, bob/tmp=30 (0 = never)"""
    expiry_sources: str = ""
    """per source, days to live: comma-separated glob=days, e.g. */scratch/*=7; wins over the scope's"""

    def problems(self) -> list[str]:
        out = [] if self.expiry_days >= 0 else ["forget.expiry_days must be >= 0 (0 = never)"]
        for name in ("expiry_scopes", "expiry_sources"):
            try:
                expiry_rules(getattr(self, name))
            except ValueError as e:
                out.append(f"forget.{name}: {e}")
        return out

    def pipeline_dirs(self) -> list[Path]:
        return [Path(p.strip()) for p in self.pipeline.split(",") if p.strip()]


def expiry_rules(text: str) -> list[tuple[str, int]]:
    """'a=7, b/*=30' -> [('a', 7), ('b/*', 30)], in the order written; ValueError on a malformed entry."""
    out = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, eq, days = entry.rpartition("=")
        if not eq or not name.strip() or not days.strip().isdigit():
            raise ValueError(f"{entry!r} is not name=days (days a whole number >= 0)")
        out.append((name.strip(), int(days)))
    return out


def packaged_defaults() -> Path:
    """The params.yaml pai-brain ships: the checkout's top-level file (a checkout, an editable install), else the
    copy a wheel installs under `<prefix>/share/pai-brain` (pyproject.toml, `data-files`)."""
    source = SOURCE_ROOT / PARAMS
    return source if source.is_file() else Path(sys.prefix) / "share" / "pai-brain" / PARAMS


def is_checkout(folder: Path) -> bool:
    """A pai-brain checkout: its params.yaml beside our source (a DVC project's own params.yaml is not ours)."""
    return (folder / PARAMS).is_file() and (folder / "retrieval" / "params.py").is_file()


def params_files(explicit: Path | str | None = None) -> list[Path]:
    """The params files a command reads, each later one a partial override of the ones before:

    1. `--params FILE`: that file alone.
    2. In a pai-brain checkout (the working folder): its params.yaml alone, what `dvc repro` and `pai retrain` read.
    3. Anywhere else (an MCP client starts `pai mcp` in any folder): the packaged defaults, then
       `$PAI_HOME/params.yaml` when it exists: only the keys it sets, section by section, key by key.
    """
    if explicit is not None:
        return [Path(explicit)]
    if is_checkout(Path.cwd()):
        return [Path(PARAMS)]
    home = pai_home() / PARAMS
    return [packaged_defaults(), *([home] if home.is_file() else [])]


def load_section(path: Path | str | None, section: str, cls: type[T]) -> T:
    """Read `section` of a params file (None: the files of `params_files`) into `cls`; raise ParamsError listing
    every problem."""
    raw = _read(path)
    return _build(raw.get(section) or {}, section, cls)


def load_key(path: Path | str | None, section: str, key: str, kind: type[T]) -> T:
    """One key of another stage's section, for a module that may not import that stage's dataclass (eval
    never imports training): required, since its default and its range check live with that dataclass."""
    values = _read(path).get(section) or {}
    if not isinstance(values, dict) or key not in values:
        raise ParamsError(f"{path or PARAMS}: {section}.{key} must be set")
    value, problem = _typed(values[key], kind)
    if problem:
        raise ParamsError(f"{section}.{key}: {problem}")
    return value


def _read(path: Path | str | None) -> dict[str, Any]:
    first, *overrides = params_files(path)
    data = _read_file(first)
    for override in overrides:
        data = merge_override(data, _read_file(override, empty_ok=True), override)
    return data


def merge_override(defaults: dict[str, Any], override: dict[str, Any], where: Path) -> dict[str, Any]:
    """`defaults` with each key `override` sets replaced; a section or key the defaults lack is an error (a typo
    would otherwise be ignored), all of them in one line."""
    merged, problems = dict(defaults), []
    for section, values in override.items():
        base = defaults.get(section)
        if not isinstance(base, dict):
            problems.append(f"{section}: unknown section")
        elif values is None:  # `search:` with nothing under it: nothing overridden
            continue
        elif not isinstance(values, dict):
            problems.append(f"{section}: must be a mapping of keys")
        else:
            problems += [f"{section}.{k}: unknown key" for k in values if k not in base]
            merged[section] = base | values
    if problems:
        raise ParamsError(f"{where}: " + "; ".join(problems))
    return merged


def _read_file(path: Path, empty_ok: bool = False) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(f"{path}: no such params file") from None
    except (yaml.YAMLError, ValueError, RecursionError) as e:  # ValueError: an int of more than 4300 digits
        raise ParamsError(f"{path}: not valid YAML ({_one_line(e)})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ParamsError(f"{path}: unreadable ({e})") from None
    if data is None and empty_ok:
        return {}
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of sections")
    return data


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())


def _build(values: dict[str, Any], section: str, cls: type[T]) -> T:
    if not isinstance(values, dict):
        raise ParamsError(f"params section {section!r} must be a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    problems = [f"{section}.{k}: unknown key" for k in values if k not in fields]
    kwargs = {}
    for name, value in values.items():
        if name not in fields:
            continue
        value, problem = _typed(value, type(fields[name].default))
        if problem:
            problems.append(f"{section}.{name}: {problem}")
            continue
        kwargs[name] = value
    if problems:
        raise ParamsError("; ".join(problems))
    obj = cls(**kwargs)
    problems = obj.problems()  # type: ignore[attr-defined]
    if problems:
        raise ParamsError("; ".join(problems))
    return obj


def _typed(value: Any, want: type) -> tuple[Any, str]:
    """`value` as a `want` (an int is accepted for a float, a bool never for an int), or a problem."""
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        return value, f"expected {want.__name__}, got {value!r}"
    return value, ""
