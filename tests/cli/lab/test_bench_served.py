"""`pai lab bench served-recall` as a user runs it (a subprocess, a real Postgres, the real MiniLM): a tiny SciFact-shaped
corpus ingested, its claims served end to end and scored over every claim; a second run compared with the first;
bad input is one line. The pure part (eval/bench/served_recall.py) with literals."""

import json
import os
import subprocess
import sys

import psycopg
import pytest

from eval.bench.served_recall import claim_recall, compare

CORPUS = [
    {"_id": "1", "title": "Bees", "text": "Honey bees collect nectar from flowers and store it as honey in wax combs."},
    {
        "_id": "2",
        "title": "Rivers",
        "text": "Rivers carry fresh water from mountains down to the sea, shaping valleys.",
    },
    {
        "_id": "3",
        "title": "Compilers",
        "text": "A compiler parses source code into a syntax tree and emits machine code.",
    },
    {
        "_id": "4",
        "title": "Stars",
        "text": "Stars fuse hydrogen into helium in their cores and shine for billions of years.",
    },
]
CLAIMS = {"10": ("Bees store nectar as honey in combs.", ["1"]), "11": ("Valleys are shaped by rivers.", ["2", "9"])}


def test_a_claim_scores_the_share_of_its_relevant_abstracts_in_the_first_k_documents():
    sources = ["c.jsonl#1", "c.jsonl#1", "c.jsonl#5", "c.jsonl#2"]  # two chunks of one abstract count once
    assert claim_recall(sources, {"1", "2"}, 2) == 0.5 and claim_recall(sources, {"1", "2"}, 3) == 1.0
    assert claim_recall(sources, {"9"}, 5) == 0.0  # a relevant abstract the first stage never found still counts
    got = compare({"a": 1.0, "b": 0.0, "gone": 1.0}, {"a": 1.0, "b": 1.0, "new": 0.0})
    assert got["claims"] == 2 and (got["old"], got["new"]) == (0.5, 1.0) and got["new_minus_old"][0] == 0.5


def cli(tmp_path, db_url, *a):
    env = os.environ | {"DATABASE_URL": db_url, "PAI_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "cli.main", *a]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def bench_dir(tmp_path):
    sf = tmp_path / "bench" / "scifact"
    (sf / "qrels").mkdir(parents=True)
    (sf / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _) in CLAIMS.items()))
    rows = [f"{q}\t{d}\t1" for q, (_, ds) in CLAIMS.items() for d in ds]
    (sf / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return tmp_path / "bench"


def test_bad_input_is_one_line(tmp_path, db_url):
    bench = bench_dir(tmp_path)
    (tmp_path / "junk.json").write_text("[1, 2]")
    (tmp_path / "wrong.json").write_text('{"claims": [1]}')
    against = [["--against", str(tmp_path / f)] for f in ("missing.json", "junk.json", "wrong.json")]
    for bad in (["--split", "dev"], ["--params", str(tmp_path / "none.yaml")], *against):
        out = cli(tmp_path, db_url, "lab", "bench", "served-recall", "--benchmark-dir", str(bench), *bad)
        assert out.returncode != 0 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_claims_are_served_end_to_end_and_compared_with_an_earlier_run(tmp_path, db_url):
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    assert cli(tmp_path, db_url, "ingest", str(tmp_path / "corpus.jsonl")).returncode == 0
    served = ["lab", "bench", "served-recall", "--benchmark-dir", str(bench_dir(tmp_path)), "--k", "1"]
    first = cli(tmp_path, db_url, *served, "--out", str(tmp_path / "a.json"))
    assert first.returncode == 0, first.stderr
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["claims"] == {"10": 1.0, "11": 0.5}  # claim 11's second abstract is not in the corpus: half found
    assert a["recall"] == 0.75
    again = cli(tmp_path, db_url, *served, "--against", str(tmp_path / "a.json"), "--json")
    assert json.loads(again.stdout)["against"] == {
        "claims": 2,
        "old": 0.75,
        "new": 0.75,
        "new_minus_old": [0.0, 0.0, 0.0],
    }
    with psycopg.connect(db_url) as conn:  # the service logged into a scratch log, dropped after
        assert conn.execute("SELECT count(*) FROM queries").fetchone() == (0,)
