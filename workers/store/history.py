"""A namespace's history as its links tell it: what replaced what, when and from which
turns, and the conflicts nothing settled (what `lychee records NS --history` prints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas.supersession import LinkKind, Supersession
from workers.store.links import LinksTable
from workers.store.records import RecordsTable


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
    records: RecordsTable, links: LinksTable, namespace: str, record_id: str | None = None
) -> History:
    """The namespace's history, or one record's (what it replaced, what replaced it, what
    contradicts it); links whose record is no longer stored are left out."""
    found = links.of_namespace(namespace, None if record_id is None else {record_id})
    ids = sorted({x for link in found for x in (link.older_id, link.newer_id)})
    rows = {r["id"]: r for r in records.by_ids(namespace, ids)}
    out = History()
    for link in found:
        if link.older_id in rows and link.newer_id in rows:
            change = _change(link, rows)
            (out.conflicts if link.kind is LinkKind.conflict else out.supersessions).append(change)
    return out


def _change(link: Supersession, rows: dict[str, dict[str, Any]]) -> Change:
    return Change(
        kind=link.kind,
        older=_said(rows[link.older_id]),
        newer=_said(rows[link.newer_id]),
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
