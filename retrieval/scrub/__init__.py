"""Secret scrubbing before anything is stored: each secret becomes `[REDACTED:KIND]`.

Three layers: our own patterns for the classes we must never miss (`patterns`: tested one by one; a name is
judged by `names`, a value by `values`; credentials in an encoding, `encoded`: a signed URL's query, a base64
`auth`), the maintained rule sets (`rule_sets`: kingfisher's provider rules, detect-secrets' provider plugins),
then context rules (`context`: "password is X", a token beside a key id, a call that takes a credential), and
last the partners and copies of what was found (`pairs`: the id half of a pair; `copies`: every copy). Replacements keep the number of lines, so chunk line ranges still point into the original file.
`version()` names the rules that scrubbed a text; `pai lab bench scrub` measures recall and the false positives.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .context import CONTEXT_PATTERNS, after_env_names, after_secret_words, beside_key_ids, call_arguments
from .copies import redact_copies
from .encoded import ENCODED_PATTERNS, signed_queries
from .names import secret_kind
from .pairs import redact_pair_ids
from .patterns import PATTERNS, apply_pattern, fold, may_match
from .rule_sets import detect_secrets_pass, rule_set_pass

__all__ = ["ScrubResult", "scrub", "scrub_all", "scrub_text", "secret_kind", "version"]

# the rules this process loaded: every module of this package (a rule lives in any of them), as imported
_RULES_DIGEST = hashlib.sha256(
    b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))
).hexdigest()[:12]


@lru_cache(maxsize=1)
def version() -> str:
    """What scrubbed a text: this package's rules (a digest of its modules' source, as imported) and the rule sets it runs.
    Stored with every document; a document scrubbed under another version is re-scrubbed by `pai maintain`."""
    from importlib import metadata

    parts = [f"rules-{_RULES_DIGEST}"]
    for dist in ("kingfisher-secret-scanner", "detect-secrets"):
        try:
            parts.append(f"{dist}-{metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}-none")
    return "+".join(parts)


@dataclass
class ScrubResult:
    text: str
    counts: Counter = field(default_factory=Counter)  # kind -> number of secrets redacted
    found: dict[str, str] = field(default_factory=dict)  # each secret redacted -> its kind (never stored)


def scrub(text: str) -> ScrubResult:
    """Replace every secret found in `text` with `[REDACTED:KIND]`, keeping line count: each copy of a secret
    found anywhere in it, and the id paired with it. Scrub a whole document before it is cut into chunks."""
    counts: Counter = Counter()
    found: dict[str, str] = {}
    folded = fold(text)
    for p in PATTERNS + ENCODED_PATTERNS + CONTEXT_PATTERNS:
        if may_match(p, text, folded) and (new := apply_pattern(p, text, counts, found)) is not text:  # replaced
            text, folded = new, fold(new)
    text = signed_queries(text, counts, found)
    text = call_arguments(text, counts, found)
    text = rule_set_pass(text, counts, found)
    text = detect_secrets_pass(text, counts, found)
    text = beside_key_ids(text, counts, found)
    text = after_secret_words(text, counts, found)
    text = after_env_names(text, counts, found)
    text = redact_pair_ids(text, found, counts)
    text = redact_copies(text, found, counts)
    return ScrubResult(text, counts, found)


def scrub_all(texts: list[str | None]) -> list[ScrubResult | None]:
    """Scrub the fields of one record together (a capture's user and assistant turns, a feedback's answer and
    correction, a pulled query with its candidates): a secret found in one is redacted in every other."""
    results = [None if t is None else scrub(t) for t in texts]
    found: dict[str, str] = {}
    for r in results:
        if r is not None:
            found.update(r.found)
    if found:
        for r in results:
            if r is not None:
                r.text = redact_copies(r.text, found, r.counts)
    return results


def scrub_text(text: str | None) -> str | None:
    """`scrub(text).text`, passing None through (optional fields: titles, answers, corrections)."""
    return None if text is None else scrub(text).text
