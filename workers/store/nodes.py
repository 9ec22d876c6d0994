"""The `nodes` table: evidence nodes and how an update folds into a stored node (DESIGN §7).

A node (entity, topic, entity-topic, temporal, event frame) links the records that share
it. Linked records are bounded with the newest kept; a record seen again moves to the
newest position, which keeps the fold idempotent under in-order redelivery: re-applying
the updates of a batch that was already applied reproduces the same row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from schemas.records import NodeType, pair_parts
from workers.embedding import Embedder, Matrix
from workers.store.arrow import ID, Pending, check_matrix, naive
from workers.store.database import DIM_KEY, MODEL_KEY, Database, MergedTable
from workers.store.records import RECORDS

NODES = "nodes"
TEXT_COLUMN = "text"


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


def nodes_schema(dim: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            ID,  # namespace/node_type/key
            ("namespace", pa.string()),
            ("node_type", pa.string()),
            ("key", pa.string()),
            ("label", pa.string()),
            ("text", pa.string()),  # label + linked texts, bounded: what is searched
            ("record_ids", pa.list_(pa.string())),  # oldest first, newest kept
            ("record_texts", pa.list_(pa.string())),  # aligned with record_ids
            ("session_id", pa.string()),
            ("first_turn_id", pa.string()),
            ("last_turn_id", pa.string()),
            ("updated_at", pa.timestamp("us")),  # latest conversation date linked
            ("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={MODEL_KEY: model, DIM_KEY: str(dim)},
    )


class NodesTable(MergedTable[NodeUpdate]):
    name = NODES
    text_column = TEXT_COLUMN

    def __init__(
        self, db: Database, max_node_records: int = 64, max_node_text_chars: int = 2000
    ) -> None:
        super().__init__(db, nodes_schema(db.dim, db.model))
        self.max_node_records = max_node_records
        self.max_node_text_chars = max_node_text_chars

    def _merge(self, tbl: Any, updates: Sequence[NodeUpdate], embedder: Embedder) -> Pending:
        existing = self.db.read_by_ids(tbl, [u.id for u in updates])
        rows: list[dict[str, Any]] = []
        vectors: list[np.ndarray | None] = []
        for up in updates:
            old, vector = existing.get(up.id, (None, None))
            row = merge_node(old, up, self.max_node_records, self.max_node_text_chars)
            if row == old:
                continue
            # Same label and head records, same vector: only links or provenance changed.
            same = old is not None and vector_source(old) == vector_source(row)
            rows.append(row)
            vectors.append(vector if same else None)
        fresh = [i for i, v in enumerate(vectors) if v is None]
        composed = node_vectors(self.db, [rows[i] for i in fresh], embedder)
        for i, vec in zip(fresh, composed, strict=True):
            vectors[i] = vec
        return Pending(rows, vectors)

    # -- reads --------------------------------------------------------------------------------

    def search_vectors(
        self,
        namespace: str,
        vectors: np.ndarray,
        limit: int,
        node_types: Iterable[NodeType | str] | None = None,
    ) -> list[list[dict[str, Any]]]:
        return self.db.search_vectors(NODES, namespace, vectors, limit, _types(node_types))

    def search_vector(
        self,
        namespace: str,
        vec: np.ndarray,
        limit: int,
        node_types: Iterable[NodeType | str] | None = None,
    ) -> list[dict[str, Any]]:
        return self.search_vectors(namespace, np.asarray([vec]), limit, node_types)[0]

    def search_text(
        self,
        namespace: str,
        text: str,
        limit: int,
        node_types: Iterable[NodeType | str] | None = None,
    ) -> list[dict[str, Any]]:
        return self.db.search_text(NODES, TEXT_COLUMN, namespace, text, limit, _types(node_types))

    def warm(self, namespace: str) -> None:
        self.db.warm(NODES, namespace, TEXT_COLUMN)

    def temporal(self, namespace: str) -> list[dict[str, Any]]:
        """Every temporal node of a namespace (a few per month of conversation), by key."""
        match = _types([NodeType.temporal])
        rows = self.db.matching(NODES, namespace, match, ["id", "key", "record_ids"])
        return sorted(rows, key=lambda r: str(r["key"]))


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


def _types(node_types: Iterable[NodeType | str] | None) -> dict[str, set[str]]:
    """The node-type match of a search (None: every type; empty: none)."""
    return {} if node_types is None else {"node_type": {NodeType(t).value for t in node_types}}


def _label_vectors(
    rows: Sequence[dict[str, Any]], texts: list[str], embedder: Embedder, dim: int
) -> Matrix:
    """The vector of each node's text; an entity/topic pair's is the normalized sum of its
    entity's and its topic's. Those are labels of nodes of the same records, so the model
    (behind its cache) computes nothing for a pair, where the pair's own label would be a new
    text for every combination a record makes; recall is the same (see
    docs/decisions.md#node-vectors-are-composed-not-embedded)."""
    parts = [
        pair_parts(text) if row["node_type"] == NodeType.entity_topic.value else (text,)
        for row, text in zip(rows, texts, strict=True)
    ]
    unique = list(dict.fromkeys(t for p in parts for t in p))
    vecs = check_matrix(embedder.embed(unique), dim)
    at = {t: i for i, t in enumerate(unique)}
    out = np.stack([vecs[[at[t] for t in p]].sum(axis=0) for p in parts])
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out.astype(np.float32, copy=False)


# About 50 tokens: a node's vector is made of its label and the linked records that start
# within its first NODE_EMBED_CHARS characters (240 recall as well as 480 on the LoCoMo dev
# split; see docs/decisions.md#node-vectors-are-composed-not-embedded).
NODE_EMBED_CHARS = 240


def vector_source(row: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """What a node's vector is made of: a text to embed and the head records whose stored
    vectors are added to it.

    The text is the label and the head records are the OLDEST linked records whose texts
    start within `NODE_EMBED_CHARS` of the label and texts joined: oldest, so the head stops
    changing once it is full and a busy node keeps its vector as it gains links. Temporal
    nodes are found by key: their label alone. An event frame's label ("session s1, turns
    t1–t9") says nothing a vector could match, so its head is embedded as one text, where
    the label weighs only its share of the tokens.
    """
    label = str(row["label"])
    if row["node_type"] == NodeType.temporal.value:
        return label, ()
    texts = [str(t) for t in row.get("record_texts") or []]
    if row["node_type"] == NodeType.event_frame.value:
        return "\n".join([label, *texts])[:NODE_EMBED_CHARS], ()
    size, head = len(label), []
    for rid, text in zip(row.get("record_ids") or [], texts, strict=True):
        if size >= NODE_EMBED_CHARS:
            break
        head.append(str(rid))
        size += 1 + len(text)
    return label, tuple(head)


def node_vectors(db: Database, rows: Sequence[dict[str, Any]], embedder: Embedder) -> Matrix:
    """Node vectors composed, not embedded: the embedding of `vector_source`'s text (a
    pair's: the normalized sum of its entity's and its topic's) plus the stored vectors of
    its head records, normalized.

    Records are embedded anyway and labels are a few tokens, so a node costs the model a
    fraction of embedding its head as one text, for about the same recall (see
    docs/decisions.md#node-vectors-are-composed-not-embedded). Records are written before
    their nodes, so every head record's vector is stored; one removed meanwhile is left out.
    """
    if not rows:
        return np.zeros((0, db.dim), dtype=np.float32)
    sources = [vector_source(r) for r in rows]
    out = _label_vectors(rows, [text for text, _ in sources], embedder, db.dim)
    records = db.table(RECORDS)
    heads = [rid for _, head in sources for rid in head]
    stored = db.read_by_ids(records, heads, columns=["id"]) if records is not None and heads else {}
    for i, (_, head) in enumerate(sources):
        for rid in head:
            if rid in stored:
                out[i] += stored[rid][1]
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out.astype(np.float32, copy=False)
