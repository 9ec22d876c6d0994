"""A record and the turn it was made of, both among a reply's first items: the turn stays.

A record restates what its turns say ("Ana signed up for the race", from Ana's turn "I signed
up for the race!"), so a reply that holds the record and a raw turn or window showing the
same turns says one thing twice and spends a place and its tokens on it. Selection's
likeness keeps the two apart only as much as their signatures differ, and a window also
shows the turn's neighbours (the question it answers, the reply that confirms it), which the
record leaves out: the window takes the record's place and the record goes last, as
selection's items that show nothing new do (`workers.query.selection.redundant_last`, which
moves a record behind a window above it; this is the case of the window below it).

An item shows a record when it shows every turn the record cites and at least half the
record's words (`SAYS`, its index terms): a window of a long reply holds the passage that
matched, which may not be the one the record was made of, and an LLM's record may say what
its turns only imply.
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.query.selection import Candidate, Fused
from workers.store.fulltext import analyze

SAYS = 0.5  # share of a record's index terms an item's text must hold to show it


def turns_over_records(chosen: Sequence[Fused], among: int) -> list[Fused]:
    """`chosen` with each record among its first `among` items that a raw turn or window
    among them shows (`shows`) replaced there by that item, if it comes later, and moved to
    the end; the rest in their order."""
    head, rest = list(chosen[:among]), list(chosen[among:])
    showing = [(i, f.candidate) for i, f in enumerate(head) if f.candidate.kind != "record"]
    out: list[Fused] = []
    late: list[Fused] = []
    taken: set[int] = set()  # items moved up to a record's place (shown there already)
    for i, f in enumerate(head):
        if i in taken:
            continue
        if f.candidate.kind == "record" and f.candidate.turn_ids:
            j = next((j for j, c in showing if shows(c, f.candidate)), None)
            if j is not None:
                late.append(f)
                if j > i and j not in taken:
                    out.append(head[j])
                    taken.add(j)
                continue
        out.append(f)
    return [*out, *rest, *late]


def shows(item: Candidate, record: Candidate) -> bool:
    """Whether `item` shows what `record` says: every turn it cites, in the same session, and
    at least `SAYS` of its index terms (a record of none: its turns alone)."""
    if item.session_id != record.session_id or not set(record.turn_ids) <= set(item.turn_ids):
        return False
    says = set(analyze(record.text))
    return not says or len(says & set(analyze(item.text))) >= SAYS * len(says)
