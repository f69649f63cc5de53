"""A passage's text, defined once: what ingest embeds (the vector stored beside the chunk), what the
learned ranker's BM25 reads, and the passage side of a cross-encoder pair, the same in ingest, training,
evaluation and serving. Change it only with a CE_INPUT_FORMAT bump (saved with every cross-encoder)."""

from __future__ import annotations

CE_INPUT_FORMAT = "ce-input/2"  # /2: the parent heading too, as ingest embeds it (`passage_text`)


def passage_text(heading: str | None, text: str, parent_heading: str | None = None) -> str:
    """The heading path (`parent / heading`), if any, above the text; a text that starts with its own
    markdown heading line is taken as it is. Ingest embeds exactly this, so the stored vector is its vector."""
    head = " / ".join(h for h in (parent_heading, heading) if h)
    return f"{head}\n{text}" if head and not text.startswith("#") else text


ce_passage = passage_text  # the cross-encoder's passage side is the passage text


def ce_clip(text: str, max_length: int) -> str:
    """`text` cut just before its word number `max_length + 1` (words split by whitespace). A pair truncated
    to `max_length` word pieces keeps the same pieces of the cut text as of the whole one: every word is at
    least one piece and the cut falls between words. The tokenizer then skips the rest of a long passage."""
    parts = text.split(maxsplit=max_length)
    return text if len(parts) <= max_length else text[: len(text) - len(parts[-1])]
