"""Whether a question asks of another value of a statement than the one a later statement
changed.

One statement often gives two values ("My home server runs Ubuntu 22.04 and has 32 GB of
RAM"), and a later one replaces one of them ("it now has 64 GB of RAM"): the link joins the
two records whole. "Which Ubuntu version am I on?" names the label of the value that did not
change ("Ubuntu" before "22.04"), and the later statement is not its answer. Values, their
labels and which pairs are one attribute's are read as the indexer's value rule reads them
(`workers.indexer.values`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from workers.indexer.values import Value, attribute_overlap, stem, values_of

MAX_CHARS = 600  # a longer record is not read for its values (their parse grows fast with length)
NAMED_WORDS = 8  # of a statement replaced whole that a turn names: its opening words


def changed_values(older: str, newers: Sequence[str]) -> tuple[list[Value], list[Value]]:
    """The values of `older` a value of the `newers` (read together) is of the same
    attribute as (what changed), and its other values (what did not); none of either for a
    record too long to read."""
    if max(len(older), *map(len, newers)) > MAX_CHARS:
        return [], []
    olds, news = values_of(older), [v for text in newers for v in values_of(text)]
    changed = [o for o in olds if any(_one_attribute(o, n) for n in news)]
    return changed, [o for o in olds if all(o is not c for c in changed)]


def replaced_part(older: str, newers: Sequence[str]) -> list[str]:
    """The values of `older` that the `newers` replaced, as `older` shows them, when it gives
    another that none of them changed ("32 GB" of "runs Ubuntu 22.04 and has 32 GB of RAM",
    replaced by "now has 64 GB of RAM"); empty when the change is of all of it, or the values
    cannot tell."""
    changed, kept = changed_values(older, newers)
    # a value named by what it is of ("32 GB of RAM"), not a date: "on March 27" is mostly
    # when the replaced value was said to hold, not another thing about it that still does
    if not any((v.label or v.head) and v.kind != "date" for v in kept):
        return []
    return list(dict.fromkeys(_as_said(older, v) for v in changed))


def replaced_values(
    older: Mapping[str, str], newer_of: Mapping[str, Sequence[str]], says_more: bool
) -> list[str]:
    """What of an item later statements replaced, when not all of it: `older` the texts of
    its replaced records, `newer_of` each one's newer statements. A statement of several
    values names those replaced when it keeps another (`replaced_part`); an item that says
    more than its replaced records (`says_more`: a turn or window with a record no link
    replaced, such as a standing rule said beside a changed address) names each replaced
    record by the values that changed, whatever it keeps, else by its opening words.
    Empty: all of it was replaced."""
    if says_more:
        named = [v for r, text in older.items() for v in _changed(text, newer_of[r])]
    else:
        parts = [replaced_part(text, newer_of[r]) for r, text in older.items()]
        named = [v for part in parts for v in part] if all(parts) else []
    return list(dict.fromkeys(named))


def _changed(older: str, newers: Sequence[str]) -> list[str]:
    """The values of `older` the `newers` changed, as it says them; else `older` by its
    first `NAMED_WORDS` words (a name that gave way to another is no value, and a long
    statement named whole would take a budget's room from the evidence)."""
    changed = [_as_said(older, v) for v in changed_values(older, newers)[0]]
    words = older.rstrip(" .;,").split()
    opening = " ".join(words[:NAMED_WORDS]) + (" ..." if len(words) > NAMED_WORDS else "")
    return changed or [opening]


def _as_said(text: str, v: Value) -> str:
    """The value as the text says it, with its label: "Postgres 15", not "15"."""
    if v.label and (m := re.search(rf"\b{re.escape(v.label)}\s+{re.escape(v.shown)}", text, re.I)):
        return m.group(0)
    return v.shown


def asks_another_value(asked: Iterable[str], older: str, newer: str) -> bool:
    """`asked` (the question's words, lowercased) names the label of a value of `older` that
    no value of `newer` changed, and neither the label nor the words after one that did."""
    changed, kept = changed_values(older, [newer])
    if not changed:
        return False
    words = {stem(w) for w in asked}

    def named(v: Value) -> bool:
        return bool(v.label) and stem(v.label) in words

    def of_a_change(v: Value) -> bool:  # "Postgres 16" by its label, "64 GB of RAM" by what follows
        return named(v) if v.label else any(stem(w) in words for w in v.following)

    return any(named(v) for v in kept) and not any(of_a_change(v) for v in changed)


def _one_attribute(a: Value, b: Value) -> bool:
    """Values of one kind, of one label when both have one ("Postgres 15", "Postgres 16";
    not "Redis 6"), else sharing words that name them."""
    if a.kind != b.kind:
        return False
    if a.label and b.label:
        return stem(a.label) == stem(b.label)
    return attribute_overlap(a, b) > 0
