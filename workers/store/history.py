"""A namespace's history as its links tell it: what replaced what, when and from which
turns, and the conflicts nothing settled (what `lychee records NS --history` prints)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from schemas.supersession import LinkKind, Supersession
from workers.store.links import LinksTable
from workers.store.records import RecordsTable
from workers.store.restated import last_sayings, said_again, when
from workers.store.segments import Place, SegmentsTable


@dataclass(frozen=True)
class Said:
    """One side of a link: the record, what it says, when and from which turns."""

    record_id: str
    text: str
    session_id: str
    turn_ids: list[str]
    said_at: datetime | None


@dataclass(frozen=True)
class Change:
    """One link with both of its records (`older` is either side of a conflict)."""

    kind: LinkKind
    older: Said
    newer: Said
    changed_at: datetime | None
    reason: str
    found_by: str


@dataclass
class History:
    """The supersessions of a namespace, oldest change first, then its open conflicts."""

    supersessions: list[Change] = field(default_factory=list)
    conflicts: list[Change] = field(default_factory=list)


def history(
    records: RecordsTable,
    links: LinksTable,
    segments: SegmentsTable,
    namespace: str,
    record_id: str | None = None,
) -> History:
    """The namespace's history, or one record's (what it replaced, what replaced it, what
    contradicts it), with the changes back that a value said again makes
    (`workers.store.restated`); links whose record is no longer stored are left out."""
    found = links.of_namespace(namespace, None if record_id is None else {record_id})
    ids = sorted({x for link in found for x in (link.older_id, link.newer_id)})
    stored = records.by_ids(namespace, ids)
    last = last_sayings(segments, namespace, stored)
    known = {x.link_id for x in found}
    back = {x.link_id: x for x in said_again(found, last) if x.link_id not in known}
    rows = {r["id"]: r for r in stored}
    out = History()
    for link in sorted([*found, *back.values()], key=when):
        if link.older_id in rows and link.newer_id in rows:
            change = _change(link, rows, last if link.link_id in back else {})
            (out.conflicts if link.kind is LinkKind.conflict else out.supersessions).append(change)
    return out


def _change(
    link: Supersession, rows: dict[str, dict[str, Any]], again: Mapping[str, Place]
) -> Change:
    """The link with its records; a change back (`again` holds the places of its records'
    last sayings) shows the newer side as said that last time."""
    newer = _said(rows[link.newer_id])
    if (place := again.get(link.newer_id)) is not None:
        newer = replace(newer, session_id=place.session_id, said_at=place.date)
    return Change(
        kind=link.kind,
        older=_said(rows[link.older_id]),
        newer=newer,
        changed_at=link.changed_at,
        reason=link.reason,
        found_by=link.found_by,
    )


def _said(row: dict[str, Any]) -> Said:
    return Said(
        record_id=row["id"],
        text=row["semantic_text"],
        session_id=row.get("source_session") or "",
        turn_ids=list(row.get("evidence") or ()),
        said_at=row.get("created_at"),
    )
