"""The generated part of the capture labelled set (data/capture/README.md): benchmark passages
wrapped as assistant answers (durable), and chatter from templates (noise). The held-out chatter
uses other objects, files and names than the stream's, so the noise gate is scored on wording it
has not seen, only on the same kinds of talk."""

from __future__ import annotations

import json
import random
from pathlib import Path

QUESTIONS = (
    "What is known about {t}?",
    "Can you tell me about {t}?",
    "Summarize the evidence on {t}.",
    "What should I remember about {t}?",
    "Explain {t} briefly.",
)
OPENERS = ("", "", "", "Sure, here's what I found. ", "Good question! ", "Here is a summary. ")
CLOSERS = ("", "", "", "", " Let me know if you want more detail.", " Hope this helps!")


def durable(benchmark_dir: Path, rng: random.Random, n_scifact: int = 150, n_hotpot: int = 150) -> list[dict]:
    """SciFact abstracts and HotpotQA passages (distinct, at least 150 characters) as answers."""
    docs = [json.loads(line) for line in (benchmark_dir / "scifact" / "corpus.jsonl").open()]
    docs = [d for d in docs if len(d["text"]) >= 150]
    passages, seen = [], set()
    for line in (benchmark_dir / "hotpotqa" / "test.jsonl").open():
        for c in json.loads(line)["candidates"]:
            if len(c["text"]) >= 150 and c["title"] not in seen:
                seen.add(c["title"])
                passages.append(c)
    out = []
    for src, picked in (("scifact", rng.sample(docs, n_scifact)), ("hotpotqa", rng.sample(passages, n_hotpot))):
        for d in picked:
            title = d["title"].rstrip(".")
            answer = rng.choice(OPENERS) + d["text"].strip() + rng.choice(CLOSERS)
            out.append(
                {
                    "id": f"{src}-{d.get('_id') or d.get('id')}",
                    "label": "durable",
                    "user": rng.choice(QUESTIONS).format(t=title),
                    "assistant": answer,
                    "from": f"{src}:{d.get('_id') or d.get('id')}",
                }
            )
    return out


ACKS = (
    "ok", "Okay!", "Thanks!", "Thank you so much.", "Got it.", "Sure thing!", "Will do.", "Done.",
    "You're welcome!", "Hi there!", "Hello!", "Good morning!", "No problem.", "Sounds good.", "Perfect, thanks!",
    "Understood.", "Noted.", "Cool.", "Great!", "Alright.", "Yes.", "Nope.", "Cheers!", "Happy to help!",
)  # fmt: skip
PAST = (
    "updated",
    "fixed",
    "refactored",
    "renamed",
    "cleaned up",
    "rewritten",
    "reformatted",
    "moved",
    "split up",
    "simplified",
)
VERBS = ("look at", "go through", "clean up", "rerun", "check", "update", "review", "tidy up", "fix", "rewrite")
SUITES = ("test suite", "build", "linter", "type checker", "CI pipeline", "pre-commit hook")
STATES = ("passes", "is green", "runs clean", "finishes without errors", "is happy again")
# disjoint vocabularies: the stream's and the held-out chatter's
OBJECTS = (
    ("the config loader", "the failing test", "the README", "the migration script", "the login handler",
     "the Dockerfile", "the CI workflow", "the API client", "the logging setup", "the date parser",
     "the settings page", "the retry helper"),
    ("the payment module", "the flaky integration test", "the changelog", "the seed script", "the signup form",
     "the compose file", "the release job", "the HTTP wrapper", "the metrics exporter", "the CSV importer",
     "the profile view", "the cache layer"),
)  # fmt: skip
FILES = (
    ("utils.py", "app.ts", "main.go", "index.html", "setup.cfg"),
    ("models.py", "server.js", "lib.rs", "style.css", "Makefile"),
)
WHERE = ("", " as you asked", " and pushed it to your branch", " just now", " in the feature branch", " on main")


def _sentence(rng: random.Random, objs, files) -> str:
    o, o2, f = rng.choice(objs), rng.choice(objs), rng.choice(files)
    return rng.choice(
        (
            f"I've {rng.choice(PAST)} {o}{rng.choice(WHERE)}.",
            f"I {rng.choice(PAST)} {o} in {f}{rng.choice(WHERE)}.",
            f"Next I'll {rng.choice(VERBS)} {o} and then {rng.choice(VERBS)} {o2}.",
            f"Let me {rng.choice(VERBS)} {o} first, then I'll get back to you.",
            f"The {rng.choice(SUITES)} {rng.choice(STATES)} now.",
            f"Let me know if you want me to {rng.choice(VERBS)} {o} as well.",
            f"Do you want me to also {rng.choice(VERBS)} {o}?",
            f"Shall I {rng.choice(VERBS)} {o} next?",
            f"Happy to {rng.choice(VERBS)} {o} too if that helps.",
            f"Sorry about the mix-up with {o}, that was my mistake.",
            f"I'm going to {rng.choice(VERBS)} {o} in {f} now.",
            f"I'm still working on {o}, it should be done in a few minutes.",
            f"Running the {rng.choice(SUITES)} again to make sure nothing else broke.",
            f"Okay, I'll leave {o} alone from now on.",
            f"All the changes to {f} are saved and committed.",
            f"Thanks for your patience while I sorted out {o}.",
        )
    )


def noise(rng: random.Random, n: int, held_out: bool) -> list[dict]:
    """`n` distinct chatter exchanges: about a quarter bare acknowledgements, a tenth one short
    sentence, the rest two to four sentences of reports, plans, offers and apologies."""
    objs, files = OBJECTS[held_out], FILES[held_out]
    out, seen = [], set()
    while len(out) < n:
        roll = rng.random()
        if roll < 0.25:
            text = rng.choice(ACKS) + ("" if rng.random() < 0.5 else " " + _sentence(rng, objs, files))
        elif roll < 0.35:
            text = _sentence(rng, objs, files)
        else:
            text = " ".join(_sentence(rng, objs, files) for _ in range(rng.randint(2, 4)))
            if rng.random() < 0.3:
                text = rng.choice(ACKS) + " " + text
        if text in seen:
            continue
        seen.add(text)
        user = rng.choice(("ok", "thanks", "go ahead", "can you do that?", "status?", "fix it please", "hi", "next"))
        out.append(
            {"id": f"noise-{'eval' if held_out else 'stream'}-{len(out) + 1}", "label": "noise", "user": user,
             "assistant": text, "kind": "noise-template"}
        )  # fmt: skip
    return out
