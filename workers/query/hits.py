"""What a search channel found, the channel lists a route fuses, and the fields a candidate
takes from a found row.

A k = 100 request handles thousands of hits, so a hit is a plain tuple and a row's fields
are read once per request (`MultiRouteRecall` keeps them by item id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


def record_id_of(item_id: str) -> str:
    """The record id in a record item's id (`record_item_id`): what links name."""
    return item_id.rsplit("/", 1)[-1]


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
            span=row.get("span"),
            span_turn_id=row.get("span_turn_id"),
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
        span_turn_id=row.get("span_turn_id"),
    )


def _role(source_role: Any) -> str | None:
    return source_role if source_role in ("user", "assistant") else None


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


@dataclass(frozen=True)
class Linked:
    """The records matched nodes link to, as the hits of a node channel (in `order`: record
    id -> the node it came through), within the request's session if it names one."""

    rows: dict[str, dict[str, Any]]
    session_id: str | None

    def __call__(self, order: dict[str, str]) -> list[Hit]:
        rows, session_id = self.rows, self.session_id
        return [
            (record_item_id(rows[r]), rows[r], 1.0, nid)
            for r, nid in order.items()
            if r in rows and (session_id is None or rows[r]["source_session"] == session_id)
        ]


def channels(
    got: dict[tuple[str, str, str], Any],
    variants: list[str],
    texts: list[str],
    orders: list[dict[str, str]],
    linked: Linked,
    around: dict[str, dict[str, Any]],
) -> tuple[dict[str, list[Channel]], dict[str, list[Channel]]]:
    """The searches' rows as channel lists: vector channels per variant, full-text channels
    per route text (`orders`: the records each node search links to, vector then text)."""
    session_id = linked.session_id
    vector_records, vector_turns = got["vector", "records", ""], got["vector", "turns", ""]
    per_variant = {
        v: [
            Channel("node_vector", linked(orders[i])),
            Channel("record_vector", record_hits(vector_records[i], session_id, "_distance")),
            Channel("turn_vector", turn_hits(vector_turns[i], "_distance", around)),
        ]
        for i, v in enumerate(variants)
    }
    per_route = {
        t: [
            Channel("node_text", linked(orders[len(variants) + j])),
            Channel("record_text", record_hits(got["text", "records", t], session_id, "_score")),
            Channel("turn_text", turn_hits(got["text", "turns", t], "_score", around)),
        ]
        for j, t in enumerate(texts)
    }
    return per_variant, per_route
