"""Every copy of a known secret. Once any layer redacted a value, each other occurrence of that exact value goes
too (the bare second copy in a log, in another chunk of the document, in another field of the same row)."""

from __future__ import annotations

from collections import Counter

from .values import REDACTED, marker

MIN_COPY = 6  # shorter values ("abc", "1234") are words and numbers too often to chase every copy of


def redact_copies(text: str, found: dict[str, str], counts: Counter) -> str:
    """Each further occurrence of a value in `found` (secret -> kind), standing alone (not inside a longer
    word), replaced by its marker."""
    secrets = [s for s in found if len(s.strip()) >= MIN_COPY and s in text and not REDACTED.search(s)]
    if not secrets:
        return text
    spans = []  # (start, end, secret) of each copy standing alone; found with str.find, linear per secret
    for secret in secrets:
        i = text.find(secret)
        while i >= 0:
            j = i + len(secret)
            if not (_word(secret[0]) and i > 0 and _word(text[i - 1])) and not (
                _word(secret[-1]) and j < len(text) and _word(text[j])
            ):
                spans.append((i, j, secret))
            i = text.find(secret, i + 1)
    if not spans:
        return text
    out, pos = [], 0
    for a, b, secret in sorted(spans, key=lambda x: (x[0], x[0] - x[1])):  # the longest copy where two overlap
        if a < pos:
            continue
        kind = found[secret]
        counts[kind] += 1
        out.append(text[pos:a] + marker(kind, secret))
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _word(c: str) -> bool:
    return c.isascii() and c.isalnum()
