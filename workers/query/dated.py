"""For a question that asks when: a record that does not say its date, with the one that does.

An encoder writes one record a sentence, so "I signed us up for the Riverside Half Marathon.
It's on Sunday, May 19th" becomes two records of one turn: the first names the event, the
second (its context names the event) says when. "When is the half marathon?" finds the
first: it names what is asked about. Shown alone it answers nothing, and the date it carries
is only the day it was said. Its sibling is in the pool, a few places down.
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.query.selection import Fused, states_date


def dated_siblings(chosen: Sequence[Fused], pool: Sequence[Fused], head: int) -> list[Fused]:
    """`chosen` with each record among its first `head` items that does not state its date
    followed by the pool's best record of the same turns that does, unless an item before it
    shows that turn's date already (a record that states it, or a turn window); the sibling
    moves up from further down the choice, or joins it. The items after move down."""
    out = list(chosen)
    i = 0
    while i < min(head, len(out)):
        c = out[i].candidate
        turns = set(c.turn_ids)
        if c.kind == "record" and not states_date(c) and not _shown(out[: i + 1], turns):
            sibling = next(
                (
                    f
                    for f in pool
                    if f.candidate.kind == "record"
                    and states_date(f.candidate)
                    and turns & set(f.candidate.turn_ids)
                ),
                None,
            )
            if sibling is not None and sibling.item_id not in {f.item_id for f in out[: i + 1]}:
                out = [f for f in out if f.item_id != sibling.item_id]
                out.insert(i + 1, sibling)
                i += 1
        i += 1
    return out


def _shown(items: Sequence[Fused], turns: set[str]) -> bool:
    """Whether an item shows the date of one of `turns`: a record stating it, or the turn."""
    return any(
        turns & set(f.candidate.turn_ids)
        and (f.candidate.kind != "record" or states_date(f.candidate))
        for f in items
    )
