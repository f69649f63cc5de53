"""The provider corpus for the scrubber (eval/provider_corpus.py): synthetic secrets generated from a rule's own
regex, each form in another file syntax, the secret the rule captures recorded beside it; rules that cannot give
a secret-shaped string give none."""

import re

from eval.provider_corpus import _bounded, build, counts

RULE = {
    "id": "gitleaks:acme-api-key",
    "source": "gitleaks",
    "provider": "acme",
    "regex": r"acme_[A-Za-z0-9]{32}",
    "group": 0,
    "entropy": 3.0,
}


def test_each_rule_gives_its_forms_in_syntaxes_taken_in_turn():
    items = build([RULE], per_rule=2, seed=0)
    assert [(i["rule"], i["provider"], i["source"]) for i in items] == [
        ("gitleaks:acme-api-key", "acme", "gitleaks")
    ] * 2
    assert [i["syntax"] for i in items] == ["note", "makefile"]
    for i in items:
        assert re.fullmatch(RULE["regex"], i["secret"]) and i["secret"] in i["text"]
    assert "ACME_API_KEY" in items[1]["text"]  # the rule's name, in the syntax's own spelling
    assert build([RULE], per_rule=2, seed=0) == items and build([RULE], per_rule=2, seed=1) != items
    assert counts(items) == "2 forms, 1 rules, 1 providers"


def test_rules_that_cannot_give_a_secret_give_none():
    broken = {**RULE, "id": "gitleaks:broken", "regex": "(unclosed"}
    plain = {**RULE, "id": "gitleaks:plain", "regex": "a{12}"}  # one letter repeated: under the entropy floor
    assert build([broken, plain], per_rule=2) == []


def test_repeats_are_capped_as_the_generator_caps_them():
    assert _bounded(r"a{2,}b{3,500}c{120,}\{1,2\}") == r"a{2,100}b{3,100}c{120,120}\{1,2\}"
