"""The string rules of capture, literal in, literal out."""

import pytest

from retrieval.conversation.capture_rules import (
    is_procedural,
    parse_facts,
    sentence_kind,
    split_facts,
    split_sentences,
    strip_code,
)

FENCE = "```"


@pytest.mark.parametrize(
    "text",
    ["ok", "Okay!", "Thanks!", "thank you so much :)", "I'll update that for you.", "Sure! I'll update that right away.",
     "Hello there, how can I help?", "You're welcome!", "Done.", "Got it, will do.", "Let me check.", "...", "👍"],
)  # fmt: skip
def test_prefilter_rejects_procedural_turns(text):
    assert is_procedural(text, 200)


@pytest.mark.parametrize(
    "text",
    ["PostgreSQL listens on port 5432 by default.", "Thanks! The capital of Australia is Canberra.",
     "No, Canberra is the capital, not Sydney."],
)  # fmt: skip
def test_prefilter_keeps_turns_with_a_fact(text):
    assert is_procedural(text, 200) is None


def test_prefilter_leaves_long_turns_to_the_later_gates():
    long = "I'll update that for you. " * 20
    assert is_procedural(long, 200) is None and is_procedural(long, 1000) == "procedural"


def test_strip_code_removes_fenced_blocks_even_unclosed():
    text = f"Use this:\n{FENCE}python\nx = 1\n{FENCE}\nIt sets x.\n~~~\nmore\n~~~\nEnd.\n{FENCE}sh\nrm -rf /"
    assert strip_code(text) == "Use this:\n\nIt sets x.\n\nEnd."
    assert strip_code(f"{FENCE}\nonly code\n{FENCE}") == ""


def test_sentences_split_at_ends_but_not_after_abbreviations_or_initials():
    assert split_sentences("Dr. Smith, e.g. here, met J. Doe. Then 3 more came! Why?\n - A bullet item") == [
        "Dr. Smith, e.g. here, met J. Doe.",
        "Then 3 more came!",
        "Why?",
        "A bullet item",
    ]


@pytest.mark.parametrize(
    "sentence,kind",
    [
        ("Does the cache expire after an hour?", "question"),
        ("I think the cache expires after an hour.", "hedge"),
        ("I've updated the cache settings for you.", "procedural"),
        ("Let me know if you want more.", "procedural"),
        ("Sure, I'll rerun it.", "procedural"),
        ("It expires after one hour.", "anaphor"),
        ("All done now.", "fragment"),
        ("The cache expires after one hour.", "fact"),
        ("We found that the cache expires after one hour.", "fact"),
    ],
)
def test_sentence_kinds(sentence, kind):
    assert sentence_kind(sentence) == kind


def test_split_facts_keeps_self_contained_declaratives():
    text = (
        "Sure, I'll explain. Redis keeps its whole dataset in memory. It persists to disk with RDB snapshots. "
        "Maybe AOF is better? I think so. Keys expire.\n\n"
        "This is unrelated to anything kept. Memcached has no persistence at all, unlike Redis."
    )
    assert split_facts(text, 40, 600) == [
        "Redis keeps its whole dataset in memory. It persists to disk with RDB snapshots.",
        "Memcached has no persistence at all, unlike Redis.",
    ]


def test_split_facts_merges_short_ones_and_caps_long_ones():
    assert split_facts("Paris is in France. Lyon is in France too. Nice is by the sea.", 40, 600) == [
        "Paris is in France. Lyon is in France too. Nice is by the sea."
    ]
    assert split_facts("word " * 200 + "ends here.", 40, 600) == []


def test_parse_facts():
    assert parse_facts("FACT: Redis is in-memory.\n- FACT: Redis persists with RDB.\nFACT: Redis is in-memory.") == [
        "Redis is in-memory.",
        "Redis persists with RDB.",
    ]
    assert parse_facts("SKIP") == [] and parse_facts("**SKIP**") == []
    assert parse_facts("I think this exchange is about Redis.") is None and parse_facts("") is None
