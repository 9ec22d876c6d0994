"""Evidence nodes derived from record metadata (DESIGN §7, paper §3.4 and App. C.3).

Pure bookkeeping, no I/O and no LLM: a `RecordBatch` yields `NodeUpdate`s (entity,
topic, entity-topic, temporal and event-frame nodes), and `merge_node` folds an update
into the stored row. Linked records are bounded with the newest kept; a record seen again
moves to the newest position, which keeps the fold idempotent under in-order redelivery:
re-applying the updates of a batch that was already applied reproduces the same row.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from schemas.records import MemoryRecord, NodeType, RecordBatch
from workers.indexer.store import naive

_SEPARATORS = re.compile(r"[_\-/.]+")
_PUNCTUATION = re.compile(r"[^\w\s]+")

# Order of the node types within one record's updates: the output order is the order
# in which nodes are first met, so the same batch always yields the same list.
_TYPE_ORDER = (NodeType.entity, NodeType.topic, NodeType.entity_topic, NodeType.temporal)


def normalize_key(text: str) -> str:
    """A stable node key: "  Lisbon-Trip!! " and "lisbon_trip" both give "lisbon trip"."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = _SEPARATORS.sub(" ", folded)
    return " ".join(_PUNCTUATION.sub("", spaced).split())


def node_id(namespace: str, node_type: NodeType | str, key: str) -> str:
    return f"{namespace}/{NodeType(node_type).value}/{key}"


@dataclass(frozen=True)
class NodeUpdate:
    """Records to link to one node; `texts[i]` is the semantic text of `record_ids[i]`.

    `updated_at` is the latest conversation date seen (not wall-clock time), so a
    replayed batch writes the same value.
    """

    namespace: str
    node_type: NodeType
    key: str
    label: str
    record_ids: tuple[str, ...]
    texts: tuple[str, ...]
    session_id: str | None = None
    first_turn_id: str | None = None
    last_turn_id: str | None = None
    updated_at: datetime | None = None

    @property
    def id(self) -> str:
        return node_id(self.namespace, self.node_type, self.key)


@dataclass
class _Acc:
    """Mutable accumulator of one node within a batch."""

    node_type: NodeType
    key: str
    label: str
    links: dict[str, str] = field(default_factory=dict)  # record id -> text, first kept


def derive_nodes(batch: RecordBatch) -> list[NodeUpdate]:
    """The node updates of one batch, merged per node, in first-met order.

    Raises `ValueError` for a record of another namespace than its batch: node ids are
    namespaced by the batch, so such a record would leak across tenants.
    """
    acc: dict[tuple[NodeType, str], _Acc] = {}

    def link(node_type: NodeType, key: str, label: str, rec: MemoryRecord) -> None:
        if not key:
            return
        node = acc.setdefault((node_type, key), _Acc(node_type, key, label))
        node.links.setdefault(rec.record_id, rec.semantic_text)

    for rec in batch.records:
        if rec.namespace != batch.namespace:
            raise ValueError(
                f"record {rec.record_id} of namespace {rec.namespace!r} in a batch of "
                f"{batch.namespace!r}"
            )
        for node_type, key, label in _record_nodes(rec):
            link(node_type, key, label, rec)

    updated_at = naive(batch.session_date)
    out = [
        NodeUpdate(
            namespace=batch.namespace,
            node_type=node.node_type,
            key=node.key,
            label=node.label,
            record_ids=tuple(node.links),
            texts=tuple(node.links.values()),
            updated_at=updated_at,
        )
        for node in acc.values()
    ]
    frame = _event_frame(batch, updated_at)
    if frame is not None:
        out.append(frame)
    return out


def _record_nodes(rec: MemoryRecord) -> list[tuple[NodeType, str, str]]:
    """(type, key, label) of every node one record links to, grouped by type."""
    entities = _keyed(rec.entities)
    tags = _keyed(rec.tags)
    by_type: dict[NodeType, list[tuple[str, str]]] = {
        NodeType.entity: entities,
        NodeType.topic: tags,
        NodeType.entity_topic: [
            (f"{ek}|{tk}", f"{el} / {tl}") for ek, el in entities for tk, tl in tags
        ],
        NodeType.temporal: _temporal_keys(rec.temporal.dates()),
    }
    return [(t, key, label) for t in _TYPE_ORDER for key, label in by_type[t]]


def _keyed(values: Iterable[str]) -> list[tuple[str, str]]:
    """(normalized key, label as first written), deduped on the key; empty keys dropped."""
    seen: dict[str, str] = {}
    for value in values:
        key = normalize_key(value)
        if key:
            seen.setdefault(key, " ".join(value.split()))
    return list(seen.items())


def _temporal_keys(dates: Iterable[str]) -> list[tuple[str, str]]:
    """`day:`+`month:` for a full date, `month:` for a month, `year:` for a year."""
    seen: dict[str, str] = {}
    for d in dates:
        if len(d) == 10:
            day = date.fromisoformat(d)
            seen.setdefault(f"day:{d}", f"{d} ({day.strftime('%A')} {day.day} {_month(day)})")
            seen.setdefault(f"month:{d[:7]}", f"{d[:7]} ({_month(day)})")
        elif len(d) == 7:
            month = date.fromisoformat(f"{d}-01")
            seen.setdefault(f"month:{d}", f"{d} ({_month(month)})")
        elif len(d) == 4:
            seen.setdefault(f"year:{d}", d)
    return list(seen.items())


def _month(d: date) -> str:
    # Spelled out so that "March 2024" finds the node by full text as well as by vector.
    return d.strftime("%B %Y")


def _event_frame(batch: RecordBatch, updated_at: datetime | None) -> NodeUpdate | None:
    links: dict[str, str] = {}
    for r in batch.records:
        links.setdefault(r.record_id, r.semantic_text)
    if not links:
        return None
    return NodeUpdate(
        namespace=batch.namespace,
        node_type=NodeType.event_frame,
        key=batch.segment_id,
        label=f"session {batch.session_id}, turns {batch.first_turn_id}–{batch.last_turn_id}",
        record_ids=tuple(links),
        texts=tuple(links.values()),
        session_id=batch.session_id,
        first_turn_id=batch.first_turn_id,
        last_turn_id=batch.last_turn_id,
        updated_at=updated_at,
    )


def combine_updates(updates: Sequence[NodeUpdate]) -> list[NodeUpdate]:
    """Fold updates of the same node (across batches, in order) into one per node.

    Equivalent to applying them one after another with `merge_node`: a record met again
    moves to the newest position, the first label stays, and later provenance wins.
    """
    merged: dict[str, NodeUpdate] = {}
    for up in updates:
        prev = merged.get(up.id)
        if prev is None:
            merged[up.id] = up
            continue
        ids, texts = _link(
            zip(prev.record_ids, prev.texts, strict=True),
            zip(up.record_ids, up.texts, strict=True),
        )
        merged[up.id] = NodeUpdate(
            namespace=up.namespace,
            node_type=up.node_type,
            key=up.key,
            label=prev.label,
            record_ids=tuple(ids),
            texts=tuple(texts),
            session_id=up.session_id or prev.session_id,
            first_turn_id=up.first_turn_id or prev.first_turn_id,
            last_turn_id=up.last_turn_id or prev.last_turn_id,
            updated_at=_latest(prev.updated_at, up.updated_at),
        )
    return list(merged.values())


def merge_node(
    existing: dict[str, Any] | None,
    update: NodeUpdate,
    max_records: int = 64,
    max_text_chars: int = 2000,
) -> dict[str, Any]:
    """The row to write for `update` over the stored row `existing` (without `vector`).

    Links are existing then new, a repeated id moved to the newest place, and only the
    newest `max_records` kept; `record_texts` stays aligned with `record_ids` so the
    search text can be rebuilt whenever the bounds change.
    """
    old = existing or {}
    ids, texts = _link(
        zip(old.get("record_ids") or [], old.get("record_texts") or [], strict=True),
        zip(update.record_ids, update.texts, strict=True),
    )
    ids, texts = ids[-max_records:], [t[:max_text_chars] for t in texts[-max_records:]]
    label = old.get("label") or update.label
    return {
        "id": update.id,
        "namespace": update.namespace,
        "node_type": update.node_type.value,
        "key": update.key,
        "label": label,
        "text": node_text(label, texts, max_text_chars),
        "record_ids": ids,
        "record_texts": texts,
        "session_id": update.session_id or old.get("session_id"),
        "first_turn_id": update.first_turn_id or old.get("first_turn_id"),
        "last_turn_id": update.last_turn_id or old.get("last_turn_id"),
        "updated_at": _latest(naive(old.get("updated_at")), update.updated_at),
    }


def node_text(label: str, texts: Sequence[str], max_chars: int = 2000) -> str:
    """Label, then the linked texts newest first, cut at `max_chars`.

    Newest first because embedding models truncate long inputs: what they see is the
    label and the most recent evidence.
    """
    parts = [label]
    size = len(label)
    for text in reversed(texts):
        room = max_chars - size - 1
        if room <= 0:
            break
        parts.append(text[:room])
        size += 1 + min(len(text), room)
    return "\n".join(parts)[:max_chars]


def _link(
    old: Iterable[tuple[str, str]], new: Iterable[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """Old links then new ones; a repeated id keeps only its newest position and text."""
    out: dict[str, str] = {}
    for rid, text in (*old, *new):
        out.pop(rid, None)
        out[rid] = text
    return list(out), list(out.values())


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)
