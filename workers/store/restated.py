"""A value said again after it was replaced: the links as they stand.

A record's id is its namespace's and its words' (`schemas.records.record_id`), so a statement
repeated word for word is one record: a value changed back in the same words ("the heater
draws 900 watts" in March, "now 650 watts" in April, "draws 900 watts" again in May) adds
its turns and its segment to the March record, which keeps its first date, and the link that
says the 650 replaced the 900 no longer tells how things stand. The record's segments keep
every time it was said: when the older record of a supersession was said again after the
newer record was last said, the change was undone, and the link stands reversed from that
day. The links table keeps what was found; this is read over it, so a forget that takes the
later saying away (its segment goes) takes the reversal with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from schemas.supersession import LinkKind, Supersession
from workers.store.segments import Place, SegmentsTable, said_after


def last_said(rows: Iterable[Mapping[str, Any]], places: Mapping[str, Place]) -> dict[str, Place]:
    """Each record's latest saying among its segments' places (a record none of whose
    segments is dated is left out)."""
    out: dict[str, Place] = {}
    for row in rows:
        found = [places[s] for s in row.get("segment_ids") or () if s in places]
        if found:
            out[str(row["id"])] = max(found)
    return out


def said_again(links: Iterable[Supersession], last: Mapping[str, Place]) -> list[Supersession]:
    """The supersessions whose older record was said again after the newer one was last
    said, each as its reverse: the older value replacing the newer from that day."""
    out: list[Supersession] = []
    for link in links:
        old, new = last.get(link.older_id), last.get(link.newer_id)
        if link.kind is not LinkKind.supersedes or old is None or new is None:
            continue
        if said_after(old, new):
            out.append(
                Supersession(
                    namespace=link.namespace,
                    kind=LinkKind.supersedes,
                    older_id=link.newer_id,
                    newer_id=link.older_id,
                    changed_at=old.date,
                    reason=f"said again on {old.date:%Y-%m-%d} after it was replaced",
                    found_by=link.found_by,
                )
            )
    return out


def as_they_stand(links: Sequence[Supersession], last: Mapping[str, Place]) -> list[Supersession]:
    """`links` with each undone supersession replaced by its reverse; a reverse that was
    found already (the LLM encoder reading the change back) is kept once, as found."""
    again = said_again(links, last)
    undone = {(x.newer_id, x.older_id) for x in again}
    kept = [
        x
        for x in links
        if x.kind is not LinkKind.supersedes or (x.older_id, x.newer_id) not in undone
    ]
    return sorted(_once([*kept, *again]), key=when)


def last_sayings(
    segments: SegmentsTable, namespace: str, rows: Sequence[Mapping[str, Any]]
) -> dict[str, Place]:
    """`last_said` of `rows`, their segments read in one pass."""
    ids = [s for row in rows for s in row.get("segment_ids") or ()]
    return last_said(rows, segments.places(namespace, ids)) if ids else {}


def _once(links: Iterable[Supersession]) -> list[Supersession]:
    out: dict[str, Supersession] = {}
    for x in links:
        out.setdefault(x.link_id, x)
    return list(out.values())


def when(link: Supersession) -> tuple[datetime, str]:
    """The order links are read in: oldest change first (as `LinksTable.of_namespace`)."""
    return (link.changed_at or datetime.min, link.link_id)
