"""Scopes: every document, chunk, query (with its feedback) and capture belongs to one, a name like
`alice/project`. One grammar, checked here before a name reaches the store: ASCII lowercase letters, digits,
`.`, `_` and `-`, in at most `MAX_SEGMENTS` segments joined by `/`, each starting with a letter or a digit (so no
empty, `.` or `..` segment), at most `MAX_CHARS` characters. A pattern (what a token may touch) is a name, a
name ending in `/*` (every scope under that prefix) or `*` (every scope)."""

from __future__ import annotations

import re

DEFAULT = "default"  # the scope of rows stored before scopes (migration 015) and of callers who name none
MAX_CHARS = 64
MAX_SEGMENTS = 3
_SEGMENT = r"[a-z0-9][a-z0-9._-]*"
_NAME = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT}){{0,{MAX_SEGMENTS - 1}}}")


class ScopeError(ValueError):
    """A scope name or pattern outside the grammar: its one-line reason."""


def check(name: object) -> str:
    """`name` when it is a scope name; else ScopeError with a one-line reason (the name shown cut and escaped)."""
    if not isinstance(name, str):
        raise ScopeError(f"scope must be a string, not {type(name).__name__}")
    if len(name) > MAX_CHARS:
        raise ScopeError(f"scope: {len(name):,} characters, at most {MAX_CHARS}")
    if not _NAME.fullmatch(name):
        shown = ascii(name[:MAX_CHARS])
        raise ScopeError(
            f"scope {shown}: use lowercase ASCII letters, digits, '.', '_' and '-', in 1 to {MAX_SEGMENTS} "
            "segments joined by '/', each starting with a letter or digit (e.g. 'alice/notes')"
        )
    return name


def check_pattern(pattern: object) -> str:
    """`pattern` when it is `*`, a scope name, or a scope name followed by `/*`; else ScopeError."""
    if pattern == "*":
        return pattern
    if isinstance(pattern, str) and pattern.endswith("/*"):
        check(pattern[:-2])
        return pattern
    return check(pattern)


def matches(pattern: str, name: str) -> bool:
    """Whether `name` falls under `pattern` (`*`: every scope; `alice/*`: `alice` and every scope below it)."""
    if pattern == "*":
        return True
    if pattern.endswith("/*"):
        prefix = pattern[:-2]
        return name == prefix or name.startswith(prefix + "/")
    return name == pattern
