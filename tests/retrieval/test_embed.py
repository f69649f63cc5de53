"""The OpenVINO backend computes the torch reference's vectors: parity on real passages, both precisions."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from retrieval.embed import Embedder, openvino_ir, resolve_backend
from retrieval.params import EmbedParams, ParamsError, _build

pytestmark = pytest.mark.skipif(resolve_backend("auto") != "openvino", reason="openvino is not installed")


@pytest.fixture(scope="module")
def passages(benchmark_dir) -> list[str]:
    """300 real abstracts (truncated at 256 word pieces, as stored) plus short, empty-ish and odd texts."""
    rows = []
    with open(benchmark_dir / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows.append(f"{d['title']}\n{d['text']}")
            if len(rows) == 300:
                break
    return rows + ["why?", "  padded query  ", "x", "ünïcödé ✓ 日本語", "def f(x):\n    return x\n"]


@pytest.fixture(scope="module")
def reference(passages) -> np.ndarray:
    return Embedder(32, "torch").encode(passages)


@pytest.mark.parametrize("precision", ["auto", "f32"])
def test_openvino_matches_torch(passages, reference, precision):
    emb = Embedder(32, "openvino", precision)
    got = emb.encode(passages)
    assert got.shape == reference.shape and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    cos = (got * reference).sum(1)
    assert cos.min() >= 0.999, f"{emb.describe()}: min cosine {cos.min():.5f}"
    if precision == "f32":
        assert cos.min() >= 0.99999
    # order of the input does not change a vector (batches are sorted by length inside)
    rev = emb.encode(passages[::-1])[::-1]
    assert np.allclose(rev, got, atol=2e-3)


def test_ir_converted_once_and_reused(tmp_path):
    from retrieval.embed import model_path

    src = model_path()
    first = openvino_ir(src, tmp_path)
    stamp = first.stat().st_mtime_ns
    assert openvino_ir(src, tmp_path) == first and first.stat().st_mtime_ns == stamp
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".convert-")]


def test_two_processes_converting_at_once(tmp_path):
    """Each converts into its own temporary folder and renames it into place: both end with the same IR."""
    code = (
        "import sys; from pathlib import Path; from retrieval.embed import model_path, openvino_ir; "
        "print(openvino_ir(model_path(), Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-500:] for _, e in outs]
    paths = {o.strip().splitlines()[-1] for o, _ in outs}
    assert len(paths) == 1 and Path(paths.pop()).is_file()
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".convert-")]


def test_threads_share_one_embedder(passages, reference):
    emb = Embedder(8, "openvino", "f32")
    results: dict[int, np.ndarray] = {}

    def go(i):
        results[i] = emb.encode(passages[i * 20 : (i + 1) * 20])

    ts = [threading.Thread(target=go, args=(i,)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    for i in range(4):
        assert ((results[i] * reference[i * 20 : (i + 1) * 20]).sum(1) >= 0.99999).all()


def test_bad_backend_is_one_line():
    with pytest.raises(ValueError, match="embed.backend must be one of"):
        Embedder(32, "onnx")
    with pytest.raises(ParamsError, match="embed.backend must be auto, openvino or torch"):
        _build({"backend": "cuda"}, "embed", EmbedParams)
    with pytest.raises(ParamsError, match="embed.precision"):
        _build({"precision": "int8"}, "embed", EmbedParams)
