"""The string rules of capture (pure functions, no model): which exchanges are procedural chatter,
fenced code removal, the deterministic fact splitter that stands in for an LLM, and the extractor
contract (its prompt and the parser of its `FACT:` / `SKIP` output)."""

from __future__ import annotations

import re

EXTRACT_PROMPT_VERSION = "capture-extract-v1"

# --- 1. pre-filter: procedural exchanges, by string rules ---------------------------------------
_ACK = (
    r"ok|okay|k|kk|sure|yes|yep|yeah|no|nope|alright|all right|right|fine|great|perfect|cool|nice|awesome|"
    r"good|got it|gotcha|understood|noted|will do|sounds good|makes sense|done|all done|fixed|updated|"
    r"thanks|thank you|thanks a lot|thank you so much|thx|ty|cheers|you'?re welcome|no problem|np|"
    r"no worries|my pleasure|anytime|of course|certainly|absolutely|hi|hello|hey|hi there|hello there|"
    r"good (?:morning|afternoon|evening|night)|bye|goodbye|see you|later|welcome|sorry|my bad|oops"
)
_ACK_ONLY = re.compile(rf"^(?:(?:{_ACK})[\s,.!]*)+$")
# sentences that only manage the conversation: promises, reports of work done, offers, sign-offs
_PROCEDURAL_START = re.compile(
    r"^(?:(?:" + _ACK + r")[\s,.!:;-]+)*"
    r"(?:i'?ll|i will|i'?m going to|i am going to|i'?ve|i have|i just|i can|i could|i'?d|i would|i'?m|i am|"
    r"i did|i ran|i made|i added|i fixed|i updated|i changed|i removed|i renamed|i moved|i created|i tried|"
    r"how can i|how may i|what can i|is there anything|what else|let me|let'?s|we'?ll|we will|we can|here'?s|here is|here are|shall i|should i|do you want|would you like|"
    r"want me to|let me know|feel free|hope (?:this|that) helps|happy to|glad to|glad|no problem|anything else|"
    r"thanks|thank you|sorry|apologies|next,? i|now,? i|first,? i|then,? i|done|all set|that'?s it|"
    r"you'?re welcome|good luck|have a)\b"
)
_NON_WORD = re.compile(r"[^\w\s']+")


def normalize(text: str) -> str:
    """Lower case, typographic apostrophes made plain, runs of spaces made one."""
    return re.sub(r"\s+", " ", text.replace("\u2019", "'").strip().lower())


def is_procedural(assistant: str, max_chars: int) -> str | None:
    """Why a short assistant turn is pure conversation management (an acknowledgement, greeting,
    thanks, a promise or report of work), or None. Longer turns are left to the later gates."""
    text = normalize(assistant)
    if len(text) > max_chars:
        return None
    bare = _NON_WORD.sub(" ", text).strip()
    if not bare:
        return "no words"
    if _ACK_ONLY.match(bare):
        return "acknowledgement"
    sentences = [normalize(s) for s in split_sentences(assistant.replace("\u2019", "'"))]
    if sentences and all(
        _PROCEDURAL_START.match(s) or _ACK_ONLY.match(_NON_WORD.sub(" ", s).strip()) for s in sentences
    ):
        return "procedural"
    return None


# --- 3. fenced code removal --------------------------------------------------------------------
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)


def strip_code(text: str) -> str:
    """The text without fenced code blocks (an unclosed fence runs to the end), blank runs squeezed."""
    out = _FENCE.sub("\n", text.replace("\r\n", "\n"))
    return re.sub(r"\n{3,}", "\n\n", out).strip()


# --- 5. the deterministic fact splitter ---------------------------------------------------------
_ABBREV = {"e.g", "i.e", "etc", "vs", "dr", "mr", "mrs", "ms", "st", "no", "fig", "al", "approx", "cf", "jr", "sr"}
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+>]|#{1,6}|\d{1,3}[.)])\s+")
_HEDGE = re.compile(
    r"\b(?:i think|i believe|i guess|i suspect|i'?m not sure|not sure|maybe|perhaps|probably|iirc|"
    r"if i remember|i'?d guess|might be wrong|could be wrong|not certain)\b"
)
# a sentence opening with these leans on the one before: merged into it, or dropped
_ANAPHOR = re.compile(
    r"^(?:this|that|these|those|it|its|they|their|them|he|she|his|her|such|both|the latter|the former)\b"
)


def split_sentences(text: str) -> list[str]:
    """Sentences of prose: each line (list marks and heading marks removed) split at . ! ? before a
    capital or digit, except after a known abbreviation or a single initial."""
    out = []
    for line in text.split("\n"):
        line = _LIST_MARK.sub("", line).strip()
        start = 0
        for m in _BOUNDARY.finditer(line):
            word = line[start : m.start()].rsplit(None, 1)[-1].lower() if line[start : m.start()].strip() else ""
            if word.rstrip(".") in _ABBREV or (len(word) == 1 and word.isalpha()):
                continue
            out.append(line[start : m.end()].strip())
            start = m.end()
        if line[start:].strip():
            out.append(line[start:].strip())
    return [s for s in out if s]


def sentence_kind(sentence: str) -> str:
    """fact | question | hedge | procedural | fragment | anaphor (a fact leaning on the sentence before)."""
    low = normalize(sentence)
    if low.endswith("?"):
        return "question"
    if _PROCEDURAL_START.match(low):
        return "procedural"
    if _HEDGE.search(low):
        return "hedge"
    if len(re.findall(r"[a-z]{2,}", low)) < 4:
        return "fragment"
    if _ANAPHOR.match(low):
        return "anaphor"
    return "fact"


def split_facts(text: str, min_chars: int, max_chars: int) -> list[str]:
    """Self-contained declarative facts of `text` (code already removed): questions, hedges and
    first-person procedural sentences dropped; a sentence that leans on the one before is merged into
    it (dropped when that one was not kept); facts under `min_chars` merged with the next one; none
    over `max_chars` (a merge that would pass it is not made)."""
    facts: list[str] = []
    prev_kept = False
    for s in split_sentences(text):
        kind = sentence_kind(s)
        if kind == "anaphor" and prev_kept and len(facts[-1]) + 1 + len(s) <= max_chars:
            facts[-1] = f"{facts[-1]} {s}"
        elif kind == "fact" and len(s) <= max_chars:
            facts.append(s)
        else:
            prev_kept = False
            continue
        prev_kept = True
    merged: list[str] = []
    for f in facts:
        if merged and len(merged[-1]) < min_chars and len(merged[-1]) + 1 + len(f) <= max_chars:
            merged[-1] = f"{merged[-1]} {f}"
        else:
            merged.append(f)
    if len(merged) > 1 and len(merged[-1]) < min_chars and len(merged[-2]) + 1 + len(merged[-1]) <= max_chars:
        merged[-2:] = [f"{merged[-2]} {merged[-1]}"]
    return [f for f in merged if len(f) >= min_chars]


# --- 5'. the LLM extractor's contract ----------------------------------------------------------
EXTRACT_SYSTEM = (
    "You keep a long-term memory of facts worth knowing later. Read the exchange and write the durable "
    "facts the assistant's answer states, one per line, each line starting with 'FACT: '. A fact stands "
    "alone: no pronoun or 'this' that needs the conversation, names spelled out, one statement. Leave out "
    "greetings, thanks, promises, plans, reports of work just done, questions, guesses and code. If "
    "nothing durable is left, write exactly: SKIP"
)


def extract_messages(user: str, assistant: str, max_chars: int = 6000) -> list[dict[str, str]]:
    """The extractor prompt (version EXTRACT_PROMPT_VERSION): system instructions, then the exchange,
    each side cut to `max_chars`."""
    return [
        {"role": "system", "content": EXTRACT_SYSTEM},
        {"role": "user", "content": f"User: {user[:max_chars]}\n\nAssistant: {assistant[:max_chars]}"},
    ]


def parse_facts(output: str) -> list[str] | None:
    """`FACT:` lines -> facts; `SKIP` (and no fact) -> []; anything else -> None (unparsable)."""
    facts, skip = [], False
    for line in output.splitlines():
        line = _LIST_MARK.sub("", line).strip()
        m = re.match(r"^\**fact\**\s*[:\-]\s*(.+)$", line, re.I)
        if m and m.group(1).strip():
            facts.append(m.group(1).strip())
        elif re.fullmatch(r"\**skip\**\.?", line, re.I):
            skip = True
    if facts:
        return list(dict.fromkeys(facts))
    return [] if skip else None
