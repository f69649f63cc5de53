"""`pai eval --benchmark FILE` where some queries have no relevant candidate (MS MARCO has
unanswerable ones): they are skipped and counted, not a ZeroDivisionError in recall_curve."""

import json

from typer.testing import CliRunner

from cli.main import app
from eval.evaluate import EvaluateParams, evaluate
from retrieval.params import UsedParams


def items():
    cands = [
        {"id": f"c{i}", "text": t}
        for i, t in enumerate(
            ["Bees make honey from nectar.", "Rivers run to the sea.", "Compilers emit machine code."]
        )
    ]
    return [
        {"qid": "1", "query": "how do bees make honey", "candidates": cands, "relevant_ids": ["c0"]},
        {"qid": "2", "query": "what is the meaning of life", "candidates": cands, "relevant_ids": []},
        {"qid": "3", "query": "where do rivers go", "candidates": cands, "relevant_ids": ["c1"]},
    ]


def test_queries_without_a_relevant_id_are_skipped_and_counted(tmp_path, embedder):
    path = tmp_path / "marco" / "dev.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(it) + "\n" for it in items()))
    result, curve = evaluate(
        EvaluateParams(benchmarks=str(path), feedback="", max_queries=0),
        embedder,
        None,
        val_fraction=0.15,
        used=UsedParams(),
    )
    r = result["marco/dev"]
    assert r["skipped_no_relevant"] == 1 and r["systems"]["cosine"]["queries"] == 2
    assert {c["k"] for c in curve} == {1, 2, 3, 4, 5}
    out = CliRunner().invoke(
        app, ["eval", "--benchmark", str(path), "--selector", "cosine", "--model", str(tmp_path / "none")]
    )
    assert out.exit_code == 0, out.output
    assert "skipped 1 queries with no relevant candidate" in out.output and "Traceback" not in out.output
