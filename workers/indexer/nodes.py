"""Evidence nodes derived from record metadata (DESIGN §7, paper §3.4 and App. C.3).

Pure bookkeeping, no I/O and no LLM: a `RecordBatch` yields `NodeUpdate`s (entity,
topic, entity-topic, temporal and event-frame nodes), which the `nodes` table of the store
folds into its rows (`workers.store.nodes`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

from schemas.records import PAIRED, MemoryRecord, NodeType, RecordBatch, pair_label
from workers.store.arrow import naive
from workers.store.nodes import NodeUpdate, combine_updates

_SEPARATORS = re.compile(r"[_\-/.]+")
_PUNCTUATION = re.compile(r"[^\w\s]+")

# Order of the node types within one record's updates: the output order is the order
# in which nodes are first met, so the same batch always yields the same list.
_TYPE_ORDER = (NodeType.entity, NodeType.topic, NodeType.entity_topic, NodeType.temporal)


def normalize_key(text: str) -> str:
    """A stable node key: "  Oslo-Trip!! " and "oslo_trip" both give "oslo trip"."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = _SEPARATORS.sub(" ", folded)
    return " ".join(_PUNCTUATION.sub("", spaced).split())


@dataclass
class _Acc:
    """Mutable accumulator of one node within a batch."""

    node_type: NodeType
    key: str
    label: str
    links: dict[str, str] = field(default_factory=dict)  # record id -> text, first kept


ALL_NODE_TYPES = frozenset(NodeType)


def derive_nodes(
    batch: RecordBatch, types: frozenset[NodeType] = ALL_NODE_TYPES
) -> list[NodeUpdate]:
    """The node updates of one batch, merged per node, in first-met order; only nodes of
    `types` (the indexer's `index_node_types`).

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
            if node_type in types:
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
    frame = _event_frame(batch, updated_at) if NodeType.event_frame in types else None
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
            (f"{ek}|{tk}", pair_label(el, tl))
            for ek, el in entities[:PAIRED]
            for tk, tl in tags[:PAIRED]
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


def updates_of(
    batches: Sequence[RecordBatch], types: frozenset[NodeType] = ALL_NODE_TYPES
) -> list[NodeUpdate]:
    """The node updates of several batches, one per node, in order (see `combine_updates`).

    Raises before anything is written when a batch is malformed."""
    return combine_updates([u for b in batches for u in derive_nodes(b, types)])
