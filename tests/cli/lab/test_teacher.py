"""`pai lab teacher`'s simulated teacher: it labels only what the consumer left unlabelled, at the precision and
recall asked (measured over a log of 400 queries), and leaves a claim without qrels as it was."""

from cli.lab.teacher import taught


def log(n: int) -> tuple[list[dict], dict[str, set[str]]]:
    records, relevant = [], {}
    for q in range(n):
        cands = [
            {"rank": r, "source": f"/d/corpus.jsonl#{q}-{r}", "used": (r == 1) if r <= 2 else None}
            for r in range(1, 21)
        ]
        records.append({"query": f"claim {q}", "candidates": cands})
        relevant[f"claim {q}"] = {f"{q}-1", f"{q}-7", f"{q}-15"}  # one shown, two below the cut
    records.append({"query": "no qrels", "candidates": [{"rank": 1, "source": "/d/c#x", "used": None}]})
    return records, relevant


def test_the_teacher_labels_the_unlabelled_at_its_precision_and_recall():
    records, relevant = log(400)
    out = taught(records, relevant, precision=0.7, recall=0.8, seed=1)
    picked = hits = rel = 0
    for before, after in zip(records[:-1], out[:-1]):
        rel_ids = relevant[before["query"]]
        for a, b in zip(before["candidates"], after["candidates"]):
            if a["used"] is not None:
                assert b["used"] == a["used"]  # the consumer's own label stays
                continue
            assert b["used"] in (True, False)  # every unlabelled candidate gets the teacher's
            hit = b["source"].rsplit("#", 1)[1] in rel_ids
            rel += hit
            picked += b["used"]
            hits += b["used"] and hit
    assert abs(hits / rel - 0.8) < 0.04 and abs(hits / picked - 0.7) < 0.04
    assert out[-1] == records[-1]  # no qrels: nothing to teach from
    assert taught(records, relevant, 1.0, 1.0, 0)[0]["candidates"][6]["used"] is True
