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
    batch_size: int = 32  # passages per forward pass
    backend: str = "auto"  # openvino where installed, else torch (the fp32 reference)
    precision: str = "auto"  # auto: bf16 where the CPU computes it natively (openvino); f32: always fp32

    def problems(self) -> list[str]:
        out = [] if self.batch_size >= 1 else ["embed.batch_size must be >= 1"]
        if self.backend not in ("auto", "openvino", "torch"):
            out.append("embed.backend must be auto, openvino or torch")
        if self.precision not in ("auto", "f32"):
            out.append("embed.precision must be auto or f32")
        return out


@dataclass(frozen=True)
class IngestParams:
    max_file_bytes: int = 5_000_000  # larger files are refused
    chunk_tokens: int = 200  # target chunk size, approximate tokens
    near_threshold: float = 0.75  # cosine at/above which a chunk of another source is linked as "near" (never skipped)
    batch_docs: int = 64  # documents written in one transaction
    embed_docs: int = 512  # documents embedded in one call (passages length-sorted together)
    bulk_max_chunks: int = (
        50_000  # a first load into an empty store builds the HNSW index after this many chunks (0 = never defer)
    )
    conversation_window: int = 80  # a conversation's chunk: adjacent turns up to this size (retrieval/dialogue.py)

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
    top_k: int = 20  # candidates for the selector
    hnsw_m: int = 16  # HNSW graph degree
    hnsw_ef_construction: int = 64  # HNSW build beam
    ef_search: int = 100  # HNSW query beam
    hybrid: bool = True  # add a keyword side, fused by reciprocal rank
    keyword: str = "fts"  # fts | trgm | both
    rrf_k: int = 60  # RRF constant
    fusion: str = "general"  # order of the fused top-k: general (retrieval.fusion) | rrf
    general_bm25: float = 1.0  # the general order: standardised cosine + this x floored BM25
    general_names_floor: float = 0.2  # its BM25 sd floor for a query naming things
    general_plain_floor: float = 2.0  # its BM25 sd floor for a query in plain words
    name_ramp: float = 0.2  # name share at which a query names things
    rare_ramp: float = 0.3  # share of words outside the embedder's vocabulary at which it does too (0 = not read)
    threshold: float = 0.2  # cosine below which a chunk never enters context
    token_budget: int = 1500  # context budget, approximate tokens
    min_chunks: int = 3  # floor the budget never cuts below, and a short selector pick is topped up to
    explore_rate: float = 0.05  # share of queries whose last context slot goes to a random candidate below the cut

    conversation_tokens: int = (
        830  # a context that leads with a conversation's chunk is filled to this many tokens (0 = off)
    )
    conversation_keyword: float = (
        1.0  # candidates led by a conversation's chunk: the keyword side's weight beside the general
    )
    # order, fused by reciprocal rank (`retrieval.dialogue.conversation_order`); 0 = the general order
    conversation_rrf_k: int = (
        30  # ... and that fusion's constant: score = 1 / (k + general position) + w / (k + keyword rank)
    )

    def problems(self) -> list[str]:
        out = []
        if not 0 <= self.explore_rate < 1:
            out.append("search.explore_rate must be in [0, 1)")
        if not 1 <= self.top_k <= 1000:
            out.append("search.top_k must be in 1..1000")
        if self.hnsw_m < 2 or self.hnsw_ef_construction < 2 * self.hnsw_m:
            out.append("search: need hnsw_m >= 2 and hnsw_ef_construction >= 2 * hnsw_m")
        if not 1 <= self.ef_search <= 1000:
            out.append("search.ef_search must be in 1..1000")
        if self.keyword not in ("fts", "trgm", "both"):
            out.append(f"search.keyword must be fts, trgm or both, not {self.keyword!r}")
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
    """What counts as a use of a shown chunk: the one definition (`retrieval.logs.used.used_labels`) that build,
    train_ranker, evaluate's held-out feedback and the trial read the feedback log by."""

    min_uncited: float = 0.8  # a shown chunk holding this share of a sentence left uncited was used (0 = off)
    void_thumbs_down: bool = True  # a query rated -1: the citations of its context are not uses

    def problems(self) -> list[str]:
        return [] if 0 <= self.min_uncited <= 1 else ["used: need min_uncited in [0, 1]"]


@dataclass(frozen=True)
class StagingParams:
    dir: str = "staging"  # one markdown file per query; a relative path is under $PAI_HOME
    git: bool = False  # commit the staging dir once per query batch

    def problems(self) -> list[str]:
        return [] if self.dir else ["staging.dir must be set"]

    def path(self) -> Path:
        """Where staging files go: `dir` as is when absolute, else under $PAI_HOME (retrieval.db.pai_home),
        like every other file the service writes."""
        d = Path(self.dir)
        return d if d.is_absolute() else pai_home() / d


@dataclass(frozen=True)
class MaintainParams:
    interval_minutes: float = 60.0  # `pai serve` runs maintenance this often in the background; 0 = off
    feedback: str = "data/feedback"  # the pull stage's folder: its watermark says which feedback was pulled
    staging_retention_days: int = 30  # staging files of older days are deleted; 0 = keep all
    feedback_retention_days: int = 180  # pulled feedback older than this is deleted; 0 = keep all
    max_gone_fraction: float = 0.5  # more stored files than this share missing: an unmounted disk? delete none
    usage_prior: bool = True  # re-order the top-k by the usage weights (see `pai bench usage`)
    usage_bound: float = 0.1  # weights lie in [-bound, +bound]; a fused score is multiplied by exp(weight)
    usage_strength: float = 5.0  # pseudo-observations pulling a chunk's use rate to the global one
    vacuum_dead_fraction: float = 0.1  # VACUUM (ANALYZE) a table when dead rows exceed this share of live ones
    recheck_growth: float = 0.2  # re-check HNSW recall when chunks grew by this share since the last check
    recheck_queries: int = 100  # queries of that check (each run twice: HNSW and exact)
    min_recall: float = 0.95  # recall@top_k below this is reported, with the ef_search that reaches it
    rescrub_batch: int = 2000  # documents re-scrubbed per run after the scrubber changed; 0 = off

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
