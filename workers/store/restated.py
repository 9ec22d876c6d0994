"""A value said again after it was replaced: the links as they stand.

A record's id is its namespace's and its words' (`schemas.records.record_id`), so a statement
repeated word for word is one record: a value changed back in the same words ("the heater
draws 900 watts" in March, "now 650 watts" in April, "draws 900 watts" again in May) adds
its turns and its segment to the March record, which keeps its first date, and the link that
says the 650 replaced the 900 no longer tells how things stand. The record's segments keep
every time it was said, and the order of the sayings decides:

- a supersession whose older record was said again after the newer one was last said stands
  reversed from that day (`said_again`);
- in a chain (the records the supersessions join) where a record was said again, a record
  that then replaces nothing, and is not the one said last, is replaced by the record said
  next after its last saying ("900 watts" again in May, "700 watts" in June: the 700
  replaces the 900, though the rules linked it to the 650 it followed in their order; or
  the 700 said in May replaced by the 900 said again in June).

The links table keeps what was found; this is read over it, so a forget that takes a saying
away (its segment goes) takes what it changed with it. The second rule reads only chains
whose records are all dated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from schemas.supersession import LinkKind, Supersession
from workers.store.links import link_order
from workers.store.segments import Place, SegmentsTable, said_after

FOUND_BY = "rule:said-again"  # a change the order of the sayings makes, not one a rule read


def sayings(
    rows: Iterable[Mapping[str, Any]], places: Mapping[str, Place]
) -> dict[str, list[Place]]:
    """Each record's dated sayings (its segments' places), in order; a record none of whose
    segments is dated is left out."""
    out: dict[str, list[Place]] = {}
    for row in rows:
        found = sorted(places[s] for s in row.get("segment_ids") or () if s in places)
        if found:
            out[str(row["id"])] = found
    return out


def said_again(
    links: Iterable[Supersession], said: Mapping[str, list[Place]]
) -> list[Supersession]:
    """The supersessions whose older record was said again after the newer one was last
    said, each as its reverse: the older value replacing the newer from that day."""
    out: list[Supersession] = []
    for link in links:
        old, new = said.get(link.older_id), said.get(link.newer_id)
        if link.kind is LinkKind.supersedes and old and new and said_after(old[-1], new[-1]):
            at = next(p for p in old if said_after(p, new[-1]))  # its first saying after
            said_again_on = f"said again on {at.date:%Y-%m-%d} after it was replaced"
            out.append(_link(link.namespace, link.newer_id, link.older_id, at, said_again_on))
    return out


def as_they_stand(
    links: Sequence[Supersession], said: Mapping[str, list[Place]]
) -> list[Supersession]:
    """`links` with each undone supersession replaced by its reverse, and in a chain with a
    record said again each record left replacing nothing replaced by the record said next
    (`_next_sayings`);
    a link found already (the LLM encoder reading the change back) is kept once, as found."""
    again = said_again(links, said)
    undone = {(x.newer_id, x.older_id) for x in again}
    kept = [
        x
        for x in links
        if x.kind is not LinkKind.supersedes or (x.older_id, x.newer_id) not in undone
    ]
    standing = _once([*kept, *again])
    back = {x.newer_id for x in again}
    return sorted(_once([*standing, *_next_sayings(standing, said, back)]), key=link_order)


def changes(links: Sequence[Supersession], said: Mapping[str, list[Place]]) -> list[Supersession]:
    """`links` as found and, in the order of the changes, those the sayings make besides
    (`as_they_stand`): the whole story a history tells."""
    return sorted(_once([*links, *as_they_stand(links, said)]), key=link_order)


def sayings_of(
    segments: SegmentsTable, namespace: str, rows: Sequence[Mapping[str, Any]]
) -> dict[str, list[Place]]:
    """`sayings` of `rows`, their segments read in one pass."""
    ids = [s for row in rows for s in row.get("segment_ids") or ()]
    return sayings(rows, segments.places(namespace, ids)) if ids else {}


def _next_sayings(
    links: Sequence[Supersession], said: Mapping[str, list[Place]], back: set[str]
) -> list[Supersession]:
    """For each chain of supersessions whose records are all dated and one of which was said
    again (`back`): every record but the one said last that replaces nothing, replaced by
    the record of the first saying after its last. Only such chains: two records the rules
    left unlinked in a chain of records said once may be two attributes ("the heater's 900
    watts and the fan's 50" replaced by "the heater now 650" and "the fan now 40")."""
    out: list[Supersession] = []
    replaces = {x.older_id for x in links if x.kind is LinkKind.supersedes}
    for chain in _chains(links):
        if not chain & back or not all(r in said for r in chain):
            continue
        order = sorted((p, r) for r in chain for p in said[r])
        for rid in sorted(chain):
            last = said[rid][-1]
            if rid in replaces or last == order[-1][0]:
                continue
            nxt = next(((p, r) for p, r in order if said_after(p, last)), None)
            if nxt is not None:
                after = f"said on {nxt[0].date:%Y-%m-%d}, after the value it replaces was last said"
                out.append(_link(links[0].namespace, rid, nxt[1], nxt[0], after))
    return out


def _chains(links: Iterable[Supersession]) -> list[set[str]]:
    """The records the supersessions join, one set per connected chain."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for link in links:
        if link.kind is LinkKind.supersedes:
            parent[root(link.older_id)] = root(link.newer_id)
    chains: dict[str, set[str]] = {}
    for rid in list(parent):
        chains.setdefault(root(rid), set()).add(rid)
    return list(chains.values())


def _link(namespace: str, older: str, newer: str, at: Place, reason: str) -> Supersession:
    return Supersession(
        namespace=namespace,
        kind=LinkKind.supersedes,
        older_id=older,
        newer_id=newer,
        changed_at=at.date,
        reason=reason,
        found_by=FOUND_BY,
    )


def _once(links: Iterable[Supersession]) -> list[Supersession]:
    out: dict[str, Supersession] = {}
    for x in links:
        out.setdefault(x.link_id, x)
    return list(out.values())
