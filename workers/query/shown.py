"""A record and the turn it was made of, both among a reply's first items: the turn stays.

A record restates what its turns say ("Ana signed up for the race", from Ana's turn "I signed
up for the race!"), so a reply that holds the record and a raw turn or window showing the
same turns says one thing twice and spends a place and its tokens on it. Selection's
likeness keeps the two apart only as much as their signatures differ, and a window also
shows the turn's neighbours (the question it answers, the reply that confirms it), which the
record leaves out: the window takes the record's place and the record goes last, as
selection's items that show nothing new do (`workers.query.selection.redundant_last`, which
moves a record behind a window above it; this is the case of the window below it).
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.query.selection import Fused


def turns_over_records(chosen: Sequence[Fused], among: int) -> list[Fused]:
    """`chosen` with each record among its first `among` items whose turns a raw turn or
    window among them shows (the same session, every one of the record's turns) replaced
    there by that item, if it comes later, and moved to the end; the rest in their order."""
    head, rest = list(chosen[:among]), list(chosen[among:])
    showing = [
        (i, f.candidate.session_id, set(f.candidate.turn_ids))
        for i, f in enumerate(head)
        if f.candidate.kind != "record"
    ]
    out: list[Fused] = []
    late: list[Fused] = []
    taken: set[int] = set()  # items moved up to a record's place (shown there already)
    for i, f in enumerate(head):
        if i in taken:
            continue
        c = f.candidate
        turns = set(c.turn_ids)
        if c.kind == "record" and turns:
            j = next((j for j, s, t in showing if s == c.session_id and turns <= t), None)
            if j is not None:
                late.append(f)
                if j > i and j not in taken:
                    out.append(head[j])
                    taken.add(j)
                continue
        out.append(f)
    return [*out, *rest, *late]
