import json
from collections import Counter
from pathlib import Path

import pytest

from retrieval.scrub import scrub

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
CASES = [  # (kind, text, expected text)
    ("AWS_ACCESS_KEY", "id AKIAIOSFODNN7EXAMPLE ok", "id [REDACTED:AWS_ACCESS_KEY] ok"),
    (
        "AWS_SECRET_KEY",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = [REDACTED:AWS_SECRET_KEY]",
    ),
    ("GITHUB_TOKEN", f"clone with {GH} now", "clone with [REDACTED:GITHUB_TOKEN] now"),
    ("GITHUB_TOKEN", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[REDACTED:GITHUB_TOKEN]"),
    ("SLACK_TOKEN", "xoxb-123456789012-abcdefghijkl", "[REDACTED:SLACK_TOKEN]"),
    ("SLACK_TOKEN", "post to https://hooks.slack.com/services/T0000/B0000/XXXXXXXX", "post to [REDACTED:SLACK_TOKEN]"),
    ("STRIPE_KEY", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:STRIPE_KEY]"),
    (
        "JWT",
        "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "t=[REDACTED:JWT]",
    ),
    ("BEARER_TOKEN", "Authorization: Bearer abcdefghijklmnop1234", "Authorization: Bearer [REDACTED:BEARER_TOKEN]"),
    (
        "PRIVATE_KEY",
        "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nxyz\n-----END RSA PRIVATE KEY-----\nb",
        "a\n[REDACTED:PRIVATE_KEY]\n\n\n\nb",
    ),
    (
        "PRIVATE_KEY",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "[REDACTED:PRIVATE_KEY]\n\n",
    ),
    (
        "SSH_KEY",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host",
        "[REDACTED:SSH_KEY] me@host",
    ),
    (
        "DB_PASSWORD",
        "DATABASE_URL=postgres://admin:s3cr3t!@db.example.com:5432/app",
        "DATABASE_URL=postgres://[REDACTED:USER]:[REDACTED:DB_PASSWORD]@db.example.com:5432/app",
    ),
    (
        "DB_PASSWORD",
        "mongodb+srv://u:pa55word@cluster0.mongodb.net",
        "mongodb+srv://[REDACTED:USER]:[REDACTED:DB_PASSWORD]@cluster0.mongodb.net",
    ),
    ("PASSWORD", 'password = "hunter2"', 'password = "[REDACTED:PASSWORD]"'),
    ("PASSWORD", "DB_PASSWORD=hunter22", "DB_PASSWORD=[REDACTED:PASSWORD]"),
    ("API_KEY", "api_key: abcd1234efgh", "api_key: [REDACTED:API_KEY]"),
    ("SECRET", "client_secret='xyzzy-plugh'", "client_secret='[REDACTED:SECRET]'"),
    ("TOKEN", "GITLAB_TOKEN=abc123def456", "GITLAB_TOKEN=[REDACTED:TOKEN]"),
    ("GOOGLE_API_KEY", "key=AIzaSyA1234567890abcdefghijklmnopqrstuv", "key=[REDACTED:GOOGLE_API_KEY]"),
    ("LLM_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED:LLM_API_KEY]"),
    (  # the maintained rule set (kingfisher: veles.secrets/sendgrid) finds it before detect-secrets does
        "SENDGRID",
        "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",
        "[REDACTED:SENDGRID]",
    ),
]


@pytest.mark.parametrize("kind,text,expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_secret_class_is_redacted(kind, text, expected):
    r = scrub(text)
    assert r.text == expected
    assert r.counts - Counter(USER=1) == {kind: 1}  # a URL's user goes with its password: the pair's other half
    assert r.text.count("\n") == text.count("\n")  # line numbers survive


def test_thirteen_or_more_classes_covered():
    assert len({c[0] for c in CASES}) >= 13


PROSE = [
    "Token: a unit of text in NLP.",
    "The password policy requires rotation every 90 days.",
    "Set your api key in the settings page.",
    "secret: the meaning of life",
    "Bearer bonds were common in the 19th century.",
    "Connect with postgres://localhost:5432/app (no password).",
    "The SHA-256 of the file is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.",
    "Authentication uses tokens: see the docs.",
    "git commit 3f2a1bc fixed the ssh-rsa parsing bug",
]


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_prose_is_left_alone(text):
    r = scrub(text)
    assert (r.text, dict(r.counts)) == (text, {})


def test_already_redacted_text_is_stable():
    once = scrub('password = "hunter2"\nAKIAIOSFODNN7EXAMPLE').text
    twice = scrub(once)
    assert twice.text == once and not twice.counts


def test_no_false_redactions_on_real_corpora(benchmark_dir):
    texts = [json.loads(line)["text"] for line in open(benchmark_dir / "scifact" / "corpus.jsonl")][:3000]
    for line in open(benchmark_dir / "hotpotqa" / "dev.jsonl"):
        texts += [c["text"] for c in json.loads(line)["candidates"]]
    redacted = [t for t in texts if scrub(t).counts]
    assert len(texts) > 5000 and redacted == []


def test_the_provider_corpus_is_redacted_and_the_rule_set_adds_to_our_rules():
    """`pai lab bench scrub`'s provider figures as floors: 799 synthetic secrets of 400 rules (gitleaks, and two
    sources independent of the scrubber's rule set: credsweeper, classifinder) over 157 providers, ten syntaxes."""
    from eval.bench.scrub import providers

    m = providers(Path(__file__).parents[1] / "data" / "provider_corpus.jsonl")
    assert m["rule_set"] == "kingfisher-secret-scanner"
    assert m["forms"] >= 790 and m["rules"] >= 400 and m["providers"] >= 150 and len(m["by_syntax"]) == 10
    assert m["recall"] >= 0.98, m["missed"]
    assert m["recall"] > m["recall_without_rule_set"]
    independent = {s: f for s, f in m["by_source"].items() if s != "gitleaks"}
    assert set(independent) == {"credsweeper", "classifinder"}
    assert all(f["recall"] >= 0.96 for f in independent.values()), independent


@pytest.mark.parametrize(
    "text,secret",
    [
        ('DEPLOY_TOKEN ?= "q8Zr2Lw9Xv4Tn7Ks"', "q8Zr2Lw9Xv4Tn7Ks"),  # Makefile
        ("$config['api_key'] .= 'q8Zr2Lw9Xv4Tn7Ks';", "q8Zr2Lw9Xv4Tn7Ks"),  # PHP
        ('apiKey := "q8Zr2Lw9Xv4Tn7Ks"', "q8Zr2Lw9Xv4Tn7Ks"),  # Go
        ('System.setProperty("DB_PASSWORD", "hunter2!x");', "hunter2!x"),  # Java
        ('<add key="ApiToken" value="q8Zr2Lw9Xv4Tn7Ks" />', "q8Zr2Lw9Xv4Tn7Ks"),  # .NET config
        ('<property name="db.password" value="s3cr3t-pw" />', "s3cr3t-pw"),  # Spring XML
        ("The staging key for prod is q8Zr2Lw9Xv4Tn7KsP0a (rotate it).", "q8Zr2Lw9Xv4Tn7KsP0a"),  # prose
        # bare provider tokens only the maintained rule set knows (Linear, Grafana, Databricks)
        (
            "note lin_api_q8Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ1kL3mN5o here",
            "lin_api_q8Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ1kL3mN5o",
        ),
        ("token glsa_q8Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ_1a2b3c4d", "q8Zr2Lw9Xv4Tn7KsP0aB3cD5eF7gH9iJ"),
        ("see dapi0123456789abcdef0123456789abcdef ok", "dapi0123456789abcdef0123456789abcdef"),
        # a provider-style token under a name that says nothing about secrets
        ("PIPELINE_TRIGGER ?= glptt-M6crfxXvWhhvzWPzuL6i-uw7nHG1nGAd8", "glptt-M6crfxXvWhhvzWPzuL6i-uw7nHG1nGAd8"),
        ('{"insights": "NRIQ-QwBReFlYk61jRjmSic5xGsQrsZP9"}', "NRIQ-QwBReFlYk61jRjmSic5xGsQrsZP9"),
        # webhook URLs carry their secret in the path
        (
            "HOOK=https://discord.com/api/webhooks/46712612965147705/8ethytEEZ8izzmim4aKhgeRO3A3V0Kct7",
            "8ethytEEZ8izzmim4aKhgeRO3A3V0Kct7",
        ),
        ("url: hooks.slack.com/services/T9O0GMUAI/B9AOK9ESO1N/It8g8mGGUzjmIiGIchDSzyT", "It8g8mGGUzjmIiGIchDSzyT"),
    ],
)
def test_syntaxes_the_context_rules_know(text, secret):
    assert secret not in scrub(text).text


@pytest.mark.parametrize(
    "text",
    [
        '_PASSWORD_WORDS = {"password", "passwd", "passphrase"}',  # a list of words is not an assignment
        "The key for success is perseverance and 24/7 effort.",
        "The key of the hash map is user_id_42.",
        'logger = logging.getLogger("pai.hotswap")',
        'headers = {"authorization": f"Bearer {token}"}',
        'self.settings.secret_key = config.get("SECRET_KEY", default)',
        'model = "sentence-transformers/all-MiniLM-L6-v2"',  # a model id: a prefix but no random tail
        'run_name = "ablation_lr3e-4_bs32_seed7"',  # words and numbers, not a random tail
        "See https://docs.github.com/en/webhooks/webhook-events-and-payloads for the fields.",
    ],
)
def test_context_rules_leave_ordinary_code_and_prose(text):
    assert scrub(text).text == text


def test_the_version_digest_covers_every_module_the_rules_live_in():
    """`version()` hashes the files of the `retrieval.scrub` package: a rule must live in one of them, so the
    package imports nothing else of ours but `db` (where the rule set's cache goes)."""
    import ast

    from retrieval import scrub as package

    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 or node.module == "db", f"{path.name}: imports ..{node.module}"
            elif isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.split(".")[0] in ("retrieval", "serving", "training", "eval", "cli") for n in names)
