"""An account of an act beside a statement that it was never done, for a question whether it
was (`workers.query.currency.current_first` applies it after the links' moves)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from schemas import EvidenceItem
from workers.store.fulltext import analyze

MIN_DENIED = 2  # words of a denial an account must share to tell the same act


# "have I ever ...?", "did I ...?": asks whether something was done
_DONE_ASKED = re.compile(r"^\W*(?:have|has|did|do|does)\s+i\b", re.IGNORECASE)
# "I've never done it", "User has never done it"
_NEVER = re.compile(
    r"\b(?:have|has|had|'ve|’ve)\s+(?:actually\s+|really\s+)?never\b|\bnever\s+(?:actually\s+)?"
    r"(?:\w+ed|been|done|made|taken|written|seen|met|got|gotten)\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[,;:.!?]|\b(?:but|so|because|which)\b", re.IGNORECASE)
_HEDGES = frozenset(analyze("actually really ever even once"))  # "never actually obtained"


def account_beside_denial(
    question: str, items: Sequence[EvidenceItem], head: int
) -> list[EvidenceItem]:
    """For a question whether something was done: when an item of the first `head` says it never
    was, the item below the head that tells of the same act comes right after it, so the
    two statements are read side by side. The act is the denial's words to its clause's
    end (stemmed as the full-text index stems them); the account shares the most of them,
    at least `MIN_DENIED`, and denies nothing itself."""
    out = list(items)
    if not _DONE_ASKED.search(question) or len(out) <= head:
        return out
    asked = set(analyze(question))
    for p, item in enumerate(out[:head]):
        verb, act = _denied_act(item.text)
        act &= asked
        if verb is None or len(act) < MIN_DENIED:
            continue
        best: tuple[int, int] | None = None
        for q in range(head, len(out)):
            if _NEVER.search(out[q].text):
                continue
            told = set(analyze(out[q].text))
            shared = len(act & told)
            if verb in told and shared >= MIN_DENIED and (best is None or shared > best[0]):
                best = (shared, q)
        if best is not None:
            out.insert(p + 1, out.pop(best[1]))
        return out  # one denial a request: the first in the head
    return out


def _denied_act(text: str) -> tuple[str | None, set[str]]:
    """What a statement says was never done: its verb (stemmed, the first word after
    "never") and every word to the clause's end; (None, empty) when it denies nothing."""
    m = _NEVER.search(text)
    if m is None:
        return None, set()
    start = m.start() + m.group(0).lower().index("never") + len("never")
    words = [w for w in analyze(_CLAUSE_END.split(text[start:], maxsplit=1)[0]) if w not in _HEDGES]
    return (words[0] if words else None), set(words)
