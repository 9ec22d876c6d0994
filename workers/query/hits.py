"""What a search channel found, and the fields a candidate takes from a found row.

A k = 100 request handles thousands of hits, so a hit is a plain tuple and a row's fields
are read once per request (`MultiRouteRecall` keeps them by item id).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

Hit = tuple[str, dict[str, Any], float, str | None]
"""One row a channel found: its item id, the row, the score it gave and the node it came
through."""


class Channel(NamedTuple):
    """The ranked hits of one search channel (`node_vector`, `turn_text`, ...)."""

    name: str
    hits: list[Hit]


def record_item_id(row: dict[str, Any]) -> str:
    """`namespace/record/<id>`, in the same form as a turn's `namespace/session/turn`."""
    return f"{row['namespace']}/record/{row['id']}"


def record_hits(
    rows: Sequence[dict[str, Any]], session_id: str | None, score_key: str
) -> list[Hit]:
    out: list[Hit] = []
    for r in rows:
        if session_id is not None and r.get("source_session") != session_id:
            continue
        out.append((record_item_id(r), r, _score(r, score_key), None))
    return out


def turn_hits(
    rows: Sequence[dict[str, Any]], score_key: str, around: dict[str, dict[str, Any]]
) -> list[Hit]:
    """Turn hits, each as its window when it has one (the hit's score carried over)."""
    out: list[Hit] = []
    for r in rows:
        hit = around.get(r["id"], r)
        out.append((hit["id"], hit, _score(r, score_key), None))
    return out


def _score(row: dict[str, Any], key: str) -> float:
    """Higher is better: a vector search's `_distance` turned into a similarity."""
    return 1.0 - float(row[key]) if key == "_distance" else float(row[key])


def is_record(row: dict[str, Any]) -> bool:
    """A record's row, not a turn window's or a raw turn's."""
    return "semantic_text" in row


def turns_of(row: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The session of a row and the turns it shows: a record's evidence, a window's turns,
    a raw turn itself."""
    if is_record(row):
        return row["source_session"], tuple(row.get("evidence") or ())
    turns = row.get("turn_ids")
    return row["session_id"], tuple(turns) if turns is not None else (row["turn_id"],)


def candidate_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A candidate's fields that come from its row: a record, a turn window or a raw turn."""
    session_id, turn_ids = turns_of(row)
    if is_record(row):
        created = row.get("created_at")
        date = row.get("t_ref") or (
            created.date().isoformat() if isinstance(created, datetime) else None
        )
        return dict(
            kind="record",
            text=row["semantic_text"],
            session_id=session_id,
            turn_ids=turn_ids,
            entities=tuple(row.get("entities") or ()),
            date=date or None,
            memory_type=row.get("memory_type"),
            role=_role(row.get("source_role")),
            mentioned=_iso(created),
            context=row.get("context") or None,
        )
    if "turn_ids" in row:
        return dict(
            kind="window",
            text=row["text"],
            session_id=session_id,
            turn_ids=turn_ids,
            date=_iso(row.get("session_date")),
        )
    return dict(
        kind="turn",
        text=row["text"],
        session_id=session_id,
        turn_ids=turn_ids,
        date=_iso(row.get("session_date")),
        speaker=row.get("speaker"),
        role=row.get("role"),
        span=row.get("span"),
    )


def _role(source_role: Any) -> str | None:
    return source_role if source_role in ("user", "assistant") else None


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None
