"""The cross-encoder input contract: how a candidate becomes the passage side of a (query, passage) pair,
the same in training and serving. Change it only with a CE_INPUT_FORMAT bump (saved with every model)."""

from __future__ import annotations

CE_INPUT_FORMAT = "ce-input/1"  # the cross-encoder's passage side; saved with the model, served the same


def ce_passage(heading: str | None, text: str) -> str:
    """The passage side of a cross-encoder pair (CE_INPUT_FORMAT): the heading, if any, above the text."""
    return f"{heading}\n{text}" if heading else text


def ce_clip(text: str, max_length: int) -> str:
    """`text` cut just before its word number `max_length + 1` (words split by whitespace). A pair truncated
    to `max_length` word pieces keeps the same pieces of the cut text as of the whole one: every word is at
    least one piece and the cut falls between words. The tokenizer then skips the rest of a long passage."""
    parts = text.split(maxsplit=max_length)
    return text if len(parts) <= max_length else text[: len(text) - len(parts[-1])]
