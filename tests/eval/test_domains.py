"""The day-one domain set (eval/domains.py) and its bench (eval/bench/day_one.py), on tiny real inputs."""

import json
import subprocess
import sys

import pytest

from eval import domains
from eval.bench import day_one
from retrieval.fusion import GeneralRule

TURNS = [
    {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel last week."},
    {
        "speaker": "Bo",
        "dia_id": "D1:2",
        "text": "Lovely! I started pottery classes on Tuesdays.",
        "blip_caption": "a clay bowl",
    },
    {"speaker": "Ann", "dia_id": "D1:3", "text": "My sister moved to Lisbon for a job at\x00 a bank."},
]


def test_a_conversation_is_turns_and_judged_questions(tmp_path):
    conv = {
        "speaker_a": "Ann",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": TURNS,
        "events_session_1": ["not a turn"],
        "qa": [
            {"question": "What is the name of Ann's cat?", "evidence": ["D1:1"], "category": 4},
            {"question": "Where did the sister move?", "evidence": ["D1:03; D1:2"], "category": 1},  # irregular
            {"question": "What did Ann's dog eat?", "evidence": ["D1:1"], "category": 5},  # adversarial: out
            {"question": "No evidence at all?", "evidence": [], "category": 2},
        ],
    }
    path = tmp_path / "conv-1.json"
    path.write_text(json.dumps(conv))
    passages, queries = domains.conversation(path)
    assert [p[0] for p in passages] == ["conv-1:D1:1", "conv-1:D1:2", "conv-1:D1:3"]
    assert passages[1][1] == "1:56 pm on 8 May, 2023" and "[shares a photo: a clay bowl]" in passages[1][2]
    assert [q[2] for q in queries] == [["conv-1:D1:1"], ["conv-1:D1:3", "conv-1:D1:2"]]


def test_dpkg_descriptions_keep_long_ones_once(tmp_path):
    status = tmp_path / "status"
    long = " A library that parses and writes configuration files in many formats,\n .\n with a small API."
    status.write_text(
        f"Package: libconf1\nStatus: install ok\nDescription: configuration file parser library\n{long * 3}\n\n"
        "Package: tiny\nDescription: too short to judge\n short.\n\n"
        f"Package: libconf-dev\nDescription: configuration file parser library\n{long * 3}\n\n"
        "Package: broken\nVersion: 1\n"
    )
    got = domains.dpkg_packages(status)
    assert [g[0] for g in got] == ["libconf1"] and " . " not in got[0][2] and len(got[0][2]) >= 150


def test_mine_keeps_every_judged_passage_and_skips_unjudged_queries(embedder):
    passages = [(f"p{i}", None, f"passage {i} about topic {i % 3} and the colour number {i}") for i in range(12)]
    passages.append(("cat", "Pets", "A grey cat named Pixel sleeps on the sofa."))
    queries = [
        ("q1", "what is the cat called", ["cat", "p3"]),
        ("q2", "the of and", ["p5"]),  # stopwords only: no keyword side
        ("q3", "nothing judged", ["missing"]),
    ]
    items = domains.mine(passages, queries, embedder, n=5)
    assert [it["qid"] for it in items] == ["q1", "q2"]
    for it in items:
        ids = [c["id"] for c in it["candidates"]]
        assert len(ids) == 5 == len(set(ids)) and set(it["relevant_ids"]) <= set(ids)
    assert items[0]["relevant_ids"] == ["cat", "p3"]


def test_day_one_rows_and_the_leave_one_domain_out_fit(embedder):
    def item(qid, query, texts, rel):
        return {
            "qid": qid,
            "query": query,
            "candidates": [{"id": str(i), "text": t} for i, t in enumerate(texts)],
            "relevant_ids": [str(rel)],
        }

    texts = [
        "The Kessler syndrome: cascading debris collisions in orbit.",
        "Bees make honey from nectar.",
        "Rivers carry water to the sea.",
        "A compiler emits machine code.",
        "Postgres stores rows in pages.",
        "Honey is sweet and sticky.",
    ]
    sets = {
        "a": [item("1", "Kessler Syndrome", texts, 0), item("2", "how do insects produce a sweet food", texts, 1)],
        "b": [
            item("3", "where does a river end up", texts, 2),
            item("4", "translating programs to machine code", texts, 3),
        ],
    }
    result = day_one.run(sets, embedder, GeneralRule())
    assert set(result["domains"]) == {"a", "b"}
    for r in result["domains"].values():
        systems = [x["system"] for x in r["rows"]]
        assert systems[:3] == ["cosine", "bm25", "hybrid"] and systems[-1] == "general order (rule before)"
        assert len(systems) == 7 and result["rule_before"] == GeneralRule(**result["rule_before"]).__dict__
        paired = [x for x in r["rows"] if "vs_before" in x]
        assert len(paired) == 3 and all(lo <= d <= hi for d, lo, hi in (x["vs_before"] for x in paired))
        assert r["best_baseline"] in day_one.BASELINES and set(r["fitted_rule"]) == set(GeneralRule().__dict__)
        assert all(0 <= x["recall@5"] <= 1 and x["ci95"][0] <= x["diff"] <= x["ci95"][1] for x in r["rows"])


def test_unknown_domain_and_empty_folder_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="unknown domain nope"):
        domains.build(["nope"], tmp_path, None, 1, 0)
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "lab", "bench", "general", "--domains", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(f"error: --domains {tmp_path}: no contract-5 files")
