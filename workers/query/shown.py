"""A record and the turn it was made of, both among a reply's first items: the turn stays.

A record restates what its turns say ("Ana signed up for the race", from Ana's turn "I signed
up for the race!"), so a reply that holds the record and a raw turn or window showing the
same turns says one thing twice and spends a place and its tokens on it. Selection's
likeness keeps the two apart only as much as their signatures differ, and a window also
shows the turn's neighbours (the question it answers, the reply that confirms it), which the
record leaves out: the window takes the record's place and the record goes last. Selection
already sends a record last behind an item above it that shows its turns
(`workers.query.selection.redundant_last`); this is the case of the item below it. In a reply
of fewer items than selection chose (k = 10 of the 30 it reads), the record then leaves the
reply, and with it the date it resolved: the window shows the turn as said, dated by its
session.

An item shows a record when it holds every turn the record cites and at least half the
record's words (`SAYS`, its index terms): a window of a long reply holds the passage that
matched, which may not be the one the record was made of, and an LLM's record may say what
its turns only imply. A record with no index terms (stop words only, or a script the index
keeps as one long word) is never shown by another item.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from workers.query.selection import Candidate, Fused, redundant_last
from workers.store.fulltext import analyze

SAYS = 0.5  # share of a record's index terms an item's text must hold to show it


def turns_over_records(chosen: Sequence[Fused], among: int, dated: bool = False) -> list[Fused]:
    """`chosen` with each record among its first `among` items that a raw turn or window
    below it among them shows replaced there by that item and moved to the end, then the
    items that show nothing new last (`redundant_last`: one the moved item now shows).

    The words decide which item moves up; once it is up, selection's own rule reads turns
    only, so another record of its turns goes last behind it whatever its words, as it would
    behind any item above it. `chosen` is selection's, which `redundant_last` has read
    already: past the first `among`, items keep their order."""
    head, rest = list(chosen[:among]), list(chosen[among:])
    out: list[Fused] = []
    late: list[Fused] = []
    taken: set[int] = set()  # items moved up to a record's place
    for i, f in enumerate(head):
        if i in taken:
            continue
        if f.candidate.kind == "record":
            below = range(i + 1, len(head))
            j = next((j for j in below if shows(head[j].candidate, f.candidate)), None)
            if j is not None:
                if j not in taken:  # else it moved up already, to an earlier record's place
                    out.append(head[j])
                    taken.add(j)
                late.append(f)
                continue
        out.append(f)
    if not late:
        return list(chosen)
    return redundant_last([*out, *rest, *late], dated=dated)


@lru_cache(maxsize=16384)  # the same records and windows come back request after request
def _terms(text: str) -> frozenset[str]:
    return frozenset(analyze(text))


def shows(item: Candidate, record: Candidate) -> bool:
    """Whether `item`, a raw turn or window, shows what `record` says: every turn it cites,
    in the same session, and at least `SAYS` of its index terms."""
    if item.kind == "record" or record.kind != "record" or not record.turn_ids:
        return False
    if item.session_id != record.session_id or not set(record.turn_ids) <= set(item.turn_ids):
        return False
    says = _terms(record.text)
    return bool(says) and len(says & _terms(item.text)) >= SAYS * len(says)
