"""Three secret scanners' published rule sets read as one list of rules for the provider corpus
(`provider_corpus.py`): each rule's source, id, provider, a Python regex (gitleaks' RE2 translated), the group
that is the secret, and the minimum entropy of a secret.

A provider is the brand that issues the credential. Names of one brand are one provider: spellings and renames
(new-relic and NewRelic, Twitter and X, Sendinblue and Brevo, Artifactory and JFrog) and products sold under the
brand (Azure and Teams are Microsoft, Vault and Terraform HashiCorp, Jira and Bitbucket Atlassian, Instagram and
Llama Meta, GCP and Firebase Google, Bedrock and MWS Amazon). A format that belongs to no provider (a JWT, a
private key, a generic key=value) has provider null and is not counted.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

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
