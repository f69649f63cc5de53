"""The scrubber's needles (`Pattern.needles`, detect-secrets' gate) only skip regexes that cannot match: its output is
the same with them as without, on every secret form we hold, on prose and code, and on texts whose letters are the
Unicode ones an IGNORECASE regex matches to ASCII (ı, İ, ſ, K)."""

import json
import re
import string
import sys
from pathlib import Path

import pytest

import retrieval.scrub as scrub_pkg
from retrieval.scrub import rule_sets, scrub
from retrieval.scrub.context import CONTEXT_PATTERNS
from retrieval.scrub.encoded import ENCODED_PATTERNS
from retrieval.scrub.patterns import PATTERNS, fold

REPO = Path(__file__).resolve().parents[2]
LOOKALIKES = str.maketrans({"i": "ı", "I": "İ", "s": "ſ", "k": "K"})
R64, HEX64, I44 = (
    "q7w8e9r0t1y2u3i4o5p6a7s8d9f0g1h2j3k4l5z6x7c8v9b0n1m2q3w4e5r6t7y8",
    "0123456789abcdef" * 4,
    "Qw3rTy7uIo9pAs5dFg1hJk2lZx4cVb6nMq8wEr0tYu-_",
)
DETECT_SECRETS_LINES = [  # one a gated detect-secrets plugin reports, each (checked in the test)
    f"cl_pw = {HEX64}",
    "cl_pwd: 'qwhrtyuioplkjhgfdsazxcvb' 7",
    f"ibm_iam_pwd = {I44}",
    f"sl_pwd = {R64}",
    f"see https://api.softlayer.com/soap/v3/{HEX64}",
    f"cos_secret_access_key = {'0a' * 24}",
    "token AKCp5abcdefghijk9 ",
    "key=AP6abcdefghijk ",
    "abcdef0123456789abcdef0123456789-us12",
]


def _texts(benchmark_dir: Path) -> list[str]:
    data = REPO / "tests" / "data"
    texts = list(DETECT_SECRETS_LINES)
    texts += [json.loads(line)["text"] for line in open(data / "provider_corpus.jsonl")]
    texts += [json.loads(line)["text"] for line in open(data / "secrets_corpus.jsonl")]
    texts += [p.read_text() for p in sorted((REPO / "retrieval" / "scrub").glob("*.py"))]  # code full of the names
    with open(benchmark_dir / "scifact" / "corpus.jsonl") as f:
        texts += [json.loads(next(f))["text"] for _ in range(300)]
    return texts + [t.translate(LOOKALIKES) for t in texts] + [t.upper() for t in texts]


def test_needles_change_no_output(monkeypatch, benchmark_dir):
    texts = _texts(benchmark_dir)
    with_needles = [scrub(t) for t in texts]
    scan_line, _ = rule_sets._detect_secrets_scanner()
    assert all(list(scan_line(line)) for line in DETECT_SECRETS_LINES)
    monkeypatch.setattr(scrub_pkg, "may_match", lambda p, text, folded: True)
    monkeypatch.setattr(rule_sets, "_detect_secrets_scanner", lambda: (scan_line, lambda line: True))
    without = [scrub(t) for t in texts]
    changed = [t[:80] for t, a, b in zip(texts, with_needles, without) if a != b]
    assert not changed, changed
    assert sum(bool(r.counts) for r in without) > 200  # secrets were found: the comparison covered redactions


def test_fold_holds_every_letter_an_ignorecase_regex_matches():
    every = "".join(chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF)
    for letter in string.ascii_lowercase:
        for ch in re.findall("(?i)" + letter, every):
            assert fold(ch) == letter, (letter, hex(ord(ch)))


@pytest.mark.parametrize(
    "p", [p for p in PATTERNS + ENCODED_PATTERNS + CONTEXT_PATTERNS if p.needles], ids=lambda p: p.kind
)
def test_needles_are_folded_where_the_regex_ignores_case(p):
    assert not p.folded or all(n == fold(n) for n in p.needles)


def test_the_detect_secrets_gate_passes_every_line_a_plugin_reports(monkeypatch):
    from collections import Counter

    lines = DETECT_SECRETS_LINES + [line.translate(LOOKALIKES) for line in DETECT_SECRETS_LINES]
    gated = [rule_sets.detect_secrets_pass(line, Counter()) for line in lines]
    scan_line, _ = rule_sets._detect_secrets_scanner()
    monkeypatch.setattr(rule_sets, "_detect_secrets_scanner", lambda: (scan_line, lambda line: True))
    assert gated == [rule_sets.detect_secrets_pass(line, Counter()) for line in lines]
    assert all("[REDACTED:" in g for g in gated[: len(DETECT_SECRETS_LINES)])
