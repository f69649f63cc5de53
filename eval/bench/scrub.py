"""The secret scrubber measured: `pai lab bench scrub`. Recall on a provider corpus (synthetic secrets per provider
rule of three scanners' rule sets, in ten file syntaxes: `tests/data/provider_corpus.jsonl`, made by
`eval/provider_corpus.py`), overall and per source, with and without the maintained rule set; redactions of
placeholder-looking strings; false positives on real prose and code.

Mechanisms: the mechanism corpus (`eval/mechanism_corpus.py`): inputs fully redacted and secrets gone, by source
and by mechanism (every copy of a found secret, assignments in any syntax, the id of a pair, prefixed tokens).

Prose: the SciFact corpus (5K biomedical abstracts: numbers, gene names, DOIs, accession ids);
every whitespace token the scrubber changes is counted. Code: this repository's own .py files
(tests and the mechanism corpus's forms aside: they hold synthetic secrets on purpose); every line it changes
is counted and shown.
"""

from __future__ import annotations

import json
from pathlib import Path

from eval import mechanism_corpus
from retrieval.scrub import rule_sets, scrub

SKIP = {".venv", ".git", "tests", "__pycache__", ".pai", ".dvc"}
SKIP_FILES = {"eval/mechanism_corpus.py", "eval/mechanism_forms.py"}  # the mechanism corpus's forms: synthetic
# secrets on purpose, as tests


def changed_tokens(before: str, after: str) -> int:
    """Tokens of `before` that the scrubber altered (lines keep their count, tokens are compared per line)."""
    n = 0
    for a, b in zip(before.split("\n"), after.split("\n")):
        if a != b:
            kept = set(b.split())
            n += sum(t not in kept for t in a.split())
    return n


def measure(corpus: Path, repo: Path) -> dict:
    docs = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8") if line.strip()]
    tokens = changed = docs_changed = 0
    prose_examples = []
    for text in docs:
        out = scrub(text).text
        tokens += len(text.split())
        if out != text:
            docs_changed += 1
            changed += changed_tokens(text, out)
            prose_examples.append(out[:200])
    files = sorted(
        p
        for p in repo.rglob("*.py")
        if not SKIP & set(p.relative_to(repo).parts) and p.relative_to(repo).as_posix() not in SKIP_FILES
    )
    lines = lines_changed = 0
    code_examples = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        out = scrub(text).text
        lines += text.count("\n") + 1
        for i, (a, b) in enumerate(zip(text.split("\n"), out.split("\n")), start=1):
            if a != b:
                lines_changed += 1
                code_examples.append(f"{f.relative_to(repo)}:{i}: {b.strip()[:160]}")
    return {
        "prose": {
            "corpus": str(corpus),
            "documents": len(docs),
            "documents_changed": docs_changed,
            "tokens": tokens,
            "tokens_changed": changed,
            "examples": prose_examples[:20],
        },
        "code": {"files": len(files), "lines": lines, "lines_changed": lines_changed, "examples": code_examples[:50]},
    }


# Placeholders as documentation writes them (tests/data/placeholders.txt, one per line): redacting one costs a
# reader little, missing a real key costs a lot.
PLACEHOLDERS_FILE = Path(__file__).resolve().parents[2] / "tests" / "data" / "placeholders.txt"
PLACEHOLDER_FORMS = ("API_TOKEN={v}", 'password: "{v}"', "export SECRET_KEY={v}", "The token is {v}.")


def providers(corpus: Path) -> dict:
    """Share of the corpus's secrets gone after scrubbing, with the rule set and without it (side by side)."""
    items = [json.loads(line) for line in open(corpus, encoding="utf-8") if line.strip()]

    def missed() -> list[dict]:
        return [it for it in items if it["secret"] in scrub(it["text"]).text]

    with_rules = missed()
    cached = rule_sets.rule_set_scanner
    rule_sets.rule_set_scanner = lambda: None
    try:
        without = missed()
    finally:
        rule_sets.rule_set_scanner = cached
    by_syntax: dict[str, list[int]] = {}
    for it in items:
        hit = it not in with_rules
        by_syntax.setdefault(it["syntax"], [0, 0])[0] += hit
        by_syntax[it["syntax"]][1] += 1

    def figures(part: list[dict]) -> dict:
        return {
            "forms": len(part),
            "rules": len({it["rule"] for it in part}),
            "providers": len({it["provider"] for it in part if it["provider"]}),  # null: a format, no provider
            "recall": round(1 - sum(it in with_rules for it in part) / max(len(part), 1), 4),
            "recall_without_rule_set": round(1 - sum(it in without for it in part) / max(len(part), 1), 4),
        }

    sources = dict.fromkeys(it.get("source", "") for it in items)
    return {
        "corpus": str(corpus),
        **figures(items),
        "rule_set": "kingfisher-secret-scanner" if cached() is not None else "not installed",
        "by_source": {s: figures([it for it in items if it.get("source", "") == s]) for s in sources},
        "by_syntax": {k: f"{a}/{n}" for k, (a, n) in sorted(by_syntax.items())},
        "missed": [f"{it['rule']} ({it['syntax']})" for it in with_rules],
    }


def mechanisms(provider_corpus: Path) -> dict:
    """The mechanism corpus (`eval/mechanism_corpus.py`): share of inputs fully redacted (every secret gone) and
    share of secrets gone, by source and by mechanism; and look-alikes changed (must be none)."""
    items = [json.loads(line) for line in open(provider_corpus, encoding="utf-8") if line.strip()]
    corpus = mechanism_corpus.build(items)
    rows = []
    for it in corpus["inputs"]:
        out = scrub(it["text"]).text
        left = [s for s in it["secrets"] if s in out]
        rows.append((it, len(left), f"{it['source']}/{it['mechanism']}/{it['form']}: {out[:160]!r}"))

    def figures(part: list[tuple]) -> dict:
        secrets = sum(len(it["secrets"]) for it, _, _ in part)
        return {
            "inputs": len(part),
            "fully_redacted": round(sum(left == 0 for _, left, _ in part) / max(len(part), 1), 4),
            "secrets": secrets,
            "secrets_redacted": round(1 - sum(left for _, left, _ in part) / max(secrets, 1), 4),
        }

    def by(key: str) -> dict:
        return {k: figures([r for r in rows if r[0][key] == k]) for k in dict.fromkeys(r[0][key] for r in rows)}

    changed = [n for n in corpus["negatives"] if scrub(n).text != n]
    return {
        **figures(rows),
        "by_source": by("source"),
        "by_mechanism": by("mechanism"),
        "negatives": len(corpus["negatives"]),
        "negatives_changed": changed,
        "missed": [why for _, left, why in rows if left],
    }


def placeholders() -> dict:
    values = [v for v in PLACEHOLDERS_FILE.read_text(encoding="utf-8").splitlines() if v.strip()]
    forms = [f.format(v=v) for v in values for f in PLACEHOLDER_FORMS]
    changed = [f for f in forms if scrub(f).text != f]
    return {
        "forms": len(forms),
        "redacted": len(changed),
        "rate": round(len(changed) / len(forms), 4),
        "examples": changed[:20],
    }


def summary(m: dict) -> list[str]:
    """The measurement as lines: the rates, then examples of what changed."""
    p, c = m["prose"], m["code"]
    head = []
    if "providers" in m:
        v = m["providers"]
        head.append(
            f"providers: {v['recall']:.1%} of {v['forms']} secrets redacted ({v['rules']} rules, {v['providers']} providers, "
            f"{len(v['by_syntax'])} syntaxes); without the rule set ({v['rule_set']}) {v['recall_without_rule_set']:.1%}"
        )
        head += [
            f"  {s}: {f['recall']:.1%} of {f['forms']} ({f['rules']} rules, {f['providers']} providers); "
            f"without the rule set {f['recall_without_rule_set']:.1%}"
            for s, f in v["by_source"].items()
            if len(v["by_source"]) > 1
        ]
    if "mechanisms" in m:
        v = m["mechanisms"]
        head.append(
            f"mechanisms: {v['fully_redacted']:.1%} of {v['inputs']} inputs fully redacted, "
            f"{v['secrets_redacted']:.1%} of {v['secrets']} secrets; {len(v['negatives_changed'])} of "
            f"{v['negatives']} look-alikes changed"
        )
        for part in ("by_source", "by_mechanism"):
            head += [
                f"  {k}: {f['fully_redacted']:.1%} of {f['inputs']} inputs, {f['secrets_redacted']:.1%} of "
                f"{f['secrets']} secrets"
                for k, f in v[part].items()
            ]
    if "placeholders" in m:
        v = m["placeholders"]
        head.append(f"placeholders: {v['redacted']} of {v['forms']} placeholder forms redacted ({v['rate']:.0%})")
    return head + [
        f"prose: {p['documents_changed']} of {p['documents']:,} SciFact abstracts changed; "
        f"{p['tokens_changed']} of {p['tokens']:,} tokens ({p['tokens_changed'] / max(p['tokens'], 1):.4%})",
        f"code:  {c['lines_changed']} of {c['lines']:,} lines in {c['files']} .py files changed ({c['lines_changed'] / max(c['lines'], 1):.4%})",
        *(f"  {e}" for e in p["examples"] + c["examples"]),
    ]
