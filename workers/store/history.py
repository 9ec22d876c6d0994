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
from workers.store.restated import changes, sayings_of
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
    said = sayings_of(segments, namespace, stored)
    known = {x.link_id for x in found}
    rows = {r["id"]: r for r in stored}
    out = History()
    for link in changes(found, said):
        if link.older_id in rows and link.newer_id in rows:
            change = _change(link, rows, said if link.link_id not in known else {})
            (out.conflicts if link.kind is LinkKind.conflict else out.supersessions).append(change)
    return out


def _change(
    link: Supersession, rows: dict[str, dict[str, Any]], said: Mapping[str, list[Place]]
) -> Change:
    """The link with its records; a change the sayings make (`said`: the records' sayings)
    shows its newer side as said on the day of the change."""
    newer = _said(rows[link.newer_id])
    at = [p for p in said.get(link.newer_id, ()) if p.date == link.changed_at]
    if at:
        newer = replace(newer, session_id=at[-1].session_id, said_at=at[-1].date)
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
