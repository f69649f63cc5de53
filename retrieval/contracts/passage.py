"""A passage's text, defined once: what ingest embeds (the vector stored beside the chunk), what the
selectors and the evaluation embed for a candidate without a stored vector, and what the learned ranker's
BM25 reads, the same in ingest, training, evaluation and serving. A change means a re-ingest (every
stored vector is of this text) and moves the ranker's BM25 feature."""

from __future__ import annotations


def passage_text(heading: str | None, text: str, parent_heading: str | None = None) -> str:
    """The heading path (`parent / heading`), if any, above the text; a text that starts with its own
    markdown heading line is taken as it is. Ingest embeds exactly this, so the stored vector is its vector."""
    head = " / ".join(h for h in (parent_heading, heading) if h)
    return f"{head}\n{text}" if head and not text.startswith("#") else text
