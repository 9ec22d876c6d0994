"""A raw turn that only asks the question again goes last.

An agent framework stores the user's message in memory, then searches memory with it (the
Agents SDK's session and `search_memory` tool do): the message itself is then the best
match of the search, and it answers nothing. A turn that asks what the question asks, in
nearly its words, tells the reader only that the question was asked; it keeps its place
behind every other item: out of the reply when k others are there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from workers.query.selection import Fused

SAME_WORDS = 0.8  # the share of the two texts' words (Jaccard) that makes one the other
_WORD = re.compile(r"\w+")
_IS = re.compile(r"['’]s\b")  # "what's" asks what "what is" asks


def echoes_last(chosen: Sequence[Fused], question: str) -> list[Fused]:
    """`chosen` with each raw turn that asks the question again moved to the end."""
    asked = _words(question)
    if not asked:
        return list(chosen)
    early: list[Fused] = []
    late: list[Fused] = []
    for f in chosen:
        (late if _echoes(f, asked) else early).append(f)
    return [*early, *late]


def _echoes(f: Fused, asked: frozenset[str]) -> bool:
    c = f.candidate
    if c.kind != "turn" or c.span is not None or not c.text.rstrip().endswith("?"):
        return False
    said = _words(c.text)
    return len(said & asked) >= SAME_WORDS * len(said | asked)


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(_IS.sub(" is", text.lower())))
