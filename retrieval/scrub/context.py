"""Context rules: a credential-like word after "password is", "client secret", "deploy token ..." in prose, a
high-entropy token beside a key id (an AWS access key's secret, a Twilio key's auth token), and a machine-made
string passed to a call that takes a credential. A bare hex hash is kept unless a secret-ish word or a key id
stands next to it."""

from __future__ import annotations

import re
from collections import Counter

from .names import may_name_a_credential, name_words, secret_kind
from .patterns import Pattern
from .values import CODE_VALUE, REDACTED, credential_like, machine_made, random_token

_SECRET_WORD = re.compile(  # secret-ish words in prose: "password is X", "client secret X", "deploy token ... X"
    # (not a shell variable: `$PWD .venv/bin/python`)
    r"(?i)(?<![\w$-])(?:pass(?:word|wd|phrase|code)|pwd|secret(?:\s+(?:key|access\s+key))?|(?:api|access|private)\s+key"
    r"|tokens?|credentials?|keys?(?=\s+(?:for|of|in|on)\b))(?=[\s:=])"
)
_PUNCT = "\"'`.,;:!?)(<>[]{}="
_CONNECTORS = {
    "is",
    "was",
    "are",
    "were",
    "be",
    "=",
    ":",
    "to",
    "set",
    "of",
    "for",
    "the",
    "our",
    "my",
    "your",
    "its",
    "this",
    "that",
    "it's",
    "here",
    "now",
    "reads",
    "equals",
    "-",
    "->",
    "=>",
    "now:",
}
# a secret standing beside a key id: (marker of the id, the secret's shape, its kind)
_BESIDE_KEY_ID = (
    (
        "[REDACTED:AWS_ACCESS_KEY]",
        re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
        "AWS_SECRET_KEY",
    ),
    ("[REDACTED:TWILIO_API_KEY]", re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32}(?![0-9A-Za-z])"), "TWILIO_AUTH_TOKEN"),
)
_KEY_ID_WINDOW = 200  # characters either side of a key id searched for its secret


def after_secret_words(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """`password is X`, `client secret X`, `the deploy token for prod is X`: the first credential-like
    word right after a secret-ish word (past connectors such as "is", ":"), or a high-entropy token
    a few words further on the same line."""
    if not _SECRET_WORD.search(text):
        return text
    out, pos = [], 0
    for m in _SECRET_WORD.finditer(text):
        if m.start() < pos:
            continue
        line_end = text.find("\n", m.end())
        rest = text[m.end() : line_end if line_end >= 0 else len(text)]
        gap = 0  # words between the secret-ish word and the value, connectors aside
        for i, w in enumerate(re.finditer(r"\S+", rest)):
            raw = w.group(0)
            word = raw.strip(_PUNCT)
            if i >= 6 or REDACTED.search(raw):
                break
            if not word or word.lower() in _CONNECTORS:
                continue
            if credential_like(word, strict=gap > 0):
                start = m.end() + w.start() + raw.find(word)
                kind = secret_kind(m.group(0).replace(" ", "_")) or "SECRET"
                out.append(text[pos:start] + f"[REDACTED:{kind}]")
                counts[kind] += 1
                if found is not None:
                    found.setdefault(word, kind)
                pos = start + len(word)
                break
            gap += 1
            if raw.endswith((".", "!", "?")):  # the sentence ends
                break
    out.append(text[pos:])
    return "".join(out)


def beside_key_ids(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """A secret next to its key id in prose: "the key AKIA... with secret <40 chars>"."""
    for marker, shape, kind in _BESIDE_KEY_ID:
        ids = [m.start() for m in re.finditer(re.escape(marker), text)]
        if not ids:
            continue

        def repl(m: re.Match[str], ids=ids, marker=marker, kind=kind) -> str:
            near = any(i - _KEY_ID_WINDOW <= m.start() <= i + len(marker) + _KEY_ID_WINDOW for i in ids)
            if not near or m.group(0).isalpha() or m.group(0).isdigit():
                return m.group(0)
            counts[kind] += 1
            if found is not None:
                found.setdefault(m.group(0), kind)
            return f"[REDACTED:{kind}]"

        text = shape.sub(repl, text)
    return text


# a call whose callee says it takes a credential (set_api_key, authenticate, login, withToken) or builds a client
_CALL = re.compile(
    r"(?P<new>\bnew[ \t]+)?(?:(?P<cls>[A-Za-z_$][\w$]*)(?:\.|::))?(?P<fn>[A-Za-z_$][\w$]*)[ \t]*"
    r"\((?P<args>[^()\n]{12,400})\)"
)
_QUOTED = re.compile(r"""(?P<q>["'`])(?P<value>[A-Za-z0-9_.+/=-]{12,200})(?P=q)""")
_CALLEE_WORDS = {"key", "apikey", "token", "secret", "password", "credential", "credentials", "login", "signin"}
_CALLEE_WORDS |= {"init", "initialize", "configure", "setup"}  # a provider's SDK set up with its key: sdk.init("…")
_CLIENT_WORDS = {"client", "api", "sdk"}


def call_arguments(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """A machine-made string passed to a call that takes a credential or builds a client or an object:
    `kario.set_api_key("…")`, `client.authenticate('…')`, `new KarioClient("…", "…")`, `Kario::Client.new('…')`,
    `Kario("…")`."""
    if "(" not in text or not _QUOTED.search(text):  # no quoted literal that could be a key: nothing to find
        return text

    def repl(call: re.Match[str]) -> str:
        fn = call.group("fn")
        if fn.lower() == "new" and call.group("cls"):  # Ruby's Client.new(…), Go's kario.New(…)
            fn = call.group("cls")
        words = name_words(fn)
        auth = any(w.startswith("auth") and not w.startswith("author") for w in words)  # HTTPBasicAuth, authenticate
        # a constructor (`new Kario(…)`, `Kario(…)`, `kario.New(…)`) not named for an id or a digest (UUID, ObjectId)
        built = (call.group("new") or fn[0].isupper() or fn != call.group("fn")) and may_name_a_credential(fn)
        if not words or not (_CALLEE_WORDS & set(words) or auth or words[-1] in _CLIENT_WORDS or built):
            return call.group(0)

        def secret(q: re.Match[str]) -> str:
            value = q.group("value")
            if REDACTED.search(value) or not (machine_made(value, 16) or random_token(value.rstrip("="))):
                return q.group(0)
            counts["SECRET"] += 1
            if found is not None:
                found.setdefault(value, "SECRET")
            return f"{q.group('q')}[REDACTED:SECRET]{q.group('q')}"

        head = call.group(0)[: call.start("args") - call.start()]
        return head + _QUOTED.sub(secret, call.group("args")) + ")"

    return _CALL.sub(repl, text)


# an environment variable's name that says it holds a credential (STRIPE_KEY, GH_TOKEN), then its value in prose
_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:KEY|TOKEN|SECRET|PASSWORD|PASS|PWD|AUTH)\b")


def after_env_names(text: str, counts: Counter, found: dict[str, str] | None = None) -> str:
    """A machine-made word a few words after a credential's environment name on the same line: "Loaded STRIPE_KEY
    from env: …", "set GH_TOKEN to …"."""
    if "_" not in text or not _ENV_NAME.search(text):
        return text
    out, pos = [], 0
    for m in _ENV_NAME.finditer(text):
        if m.start() < pos:
            continue
        end = min(len(text), m.end() + 400)  # five words on, within the line
        line_end = text.find("\n", m.end(), end)
        rest = text[m.end() : line_end if line_end >= 0 else end]
        for i, w in enumerate(re.finditer(r"\S+", rest)):
            word = w.group(0).strip(_PUNCT)
            if i >= 5 or REDACTED.search(w.group(0)):
                break
            if machine_made(word, 16) or random_token(word.rstrip("=")):
                start = m.end() + w.start() + w.group(0).find(word)
                out.append(text[pos:start] + "[REDACTED:SECRET]")
                counts["SECRET"] += 1
                if found is not None:
                    found.setdefault(word, "SECRET")
                pos = start + len(word)
                break
    out.append(text[pos:])
    return "".join(out)


def _named_sibling(m: re.Match[str]) -> str | None:
    value = m.group("value")
    return None if CODE_VALUE.match(value) or value.isalpha() and value.islower() else secret_kind(m.group("key"))


CONTEXT_PATTERNS: tuple[Pattern, ...] = (
    Pattern(  # a name element, then its value's: Jenkins' <string>API_TOKEN</string><string>…</string>, a plist's
        # <key>apiToken</key><string>…</string>
        "SECRET",
        re.compile(
            r"<(?P<t1>[\w.-]{1,20})>(?P<key>[A-Za-z_][\w.-]{0,80})</(?P=t1)>\s{0,200}"
            r"<(?P<t2>[\w.-]{1,20})>(?P<value>[^<>\s]{4,})</(?P=t2)>"
        ),
        "value",
        _named_sibling,
        needles=("</",),
    ),
)
