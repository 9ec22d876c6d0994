"""Forgetting a namespace or one session in the evidence store.

Only rows that predate the forget's fence go (workers.store.lineage): a stage that wrote
rows from exchanges sent after the forget, before it saw the forget, keeps them. A
namespace otherwise goes whole: every row of it in `turns`, `records`, `nodes` and `segments`. A
session takes its turns and segments, the records whose only evidence is in it (every segment that produced them
belongs to it), the supersession links of those records (workers.store.links), and the
links and provenance that point at what was removed: a record
that other sessions also produced keeps its row with that session's segments and turns
struck out; a node loses the links to removed records and its session provenance, and
goes when no link is left. Then each changed table is rewritten so that no version, data,
deletion or index file still holds a removed row (`Database.rewrite`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workers.embedding import Embedder
from workers.store import lineage
from workers.store.links import LINKS, drop_with
from workers.store.nodes import NODES, node_text, node_vectors, vector_source
from workers.store.records import RECORDS
from workers.store.segments import SEGMENTS
from workers.store.sql import namespace_filter
from workers.store.turns import TURNS


@dataclass
class Forgotten:
    """What a forget removed from the store."""

    rows_removed: dict[str, int] = field(default_factory=dict)
    rows_updated: dict[str, int] = field(default_factory=dict)
    versions_pruned: int = 0
    segments: list[str] = field(default_factory=list)  # retention: the ids of those expired
    # records that stay and lost a supersession link: the rules read them again
    unlinked: set[str] = field(default_factory=set)


def segment_session(segment_id: str) -> str:
    """The session of a segment id (`namespace/session_id/n`; names hold no `/`)."""
    parts = segment_id.split("/")
    return parts[1] if len(parts) >= 3 else ""


def strike_session(
    record: dict[str, Any], session_id: str, session_turns: set[str]
) -> dict[str, Any] | None:
    """`record` without the provenance of `session_id`; None when nothing else supports it."""
    segments = list(record.get("segment_ids") or [])
    others = [s for s in segments if segment_session(s) != session_id]
    if not segments:  # written before segment ids were kept: its source session decides
        return None if record.get("source_session") == session_id else record
    if not others:
        return None
    if len(others) == len(segments):
        return record
    out = dict(record)
    out["segment_ids"] = others
    out["evidence"] = [e for e in record.get("evidence") or [] if e not in session_turns]
    if segment_session(str(record.get("segment_id") or "")) == session_id:
        out["segment_id"] = others[0]
    if record.get("source_session") == session_id:
        out["source_session"] = segment_session(others[0])
    return out


def unlink(
    node: dict[str, Any], removed: set[str], session_id: str | None, max_text_chars: int
) -> dict[str, Any] | None:
    """`node` without links to `removed` records and without `session_id` provenance;
    None when no link is left."""
    pairs = [
        (rid, text)
        for rid, text in zip(
            node.get("record_ids") or [], node.get("record_texts") or [], strict=True
        )
        if rid not in removed
    ]
    if not pairs:
        return None
    out = dict(node)
    out["record_ids"] = [rid for rid, _ in pairs]
    out["record_texts"] = [text for _, text in pairs]
    out["text"] = node_text(str(node["label"]), out["record_texts"], max_text_chars)
    if session_id is not None and node.get("session_id") == session_id:
        out["session_id"] = out["first_turn_id"] = out["last_turn_id"] = None
    return out


def forget(
    store: Any,
    namespace: str,
    session_id: str | None,
    embedder: Embedder | None,
    fence: Mapping[int, int] | None = None,
) -> Forgotten:
    """Remove a namespace, or one session of it, from `store` (an `EvidenceStore`): the rows
    whose lineage predates `fence` (workers.store.lineage; None: every row of it)."""
    out = Forgotten()

    def rewrite(name: str, drop: Any, updated: Sequence[tuple[dict[str, Any], Any]] = ()) -> None:
        removed, pruned = store.db.rewrite(name, store.tables[name].text_column, drop, updated)
        out.rows_removed[name] = removed
        out.rows_updated[name] = len(updated)
        out.versions_pruned += pruned

    def in_scope(d: pa.Table) -> Any:
        mask = pc.equal(d.column("namespace"), namespace)
        if session_id is not None:
            mask = pc.and_(mask, pc.equal(d.column("session_id"), session_id))
        return mask

    rewrite(SEGMENTS, lambda d: lineage.predating(d, in_scope(d), fence))
    if session_id is None:
        rewrite(TURNS, lambda d: lineage.predating(d, in_scope(d), fence))
        lineages = _lineages(store, RECORDS, "id", namespace)
        gone = {r for r, lin in lineages.items() if lineage.predates(lin, fence)}
        rewrite(RECORDS, _ids_mask(gone))
        out.unlinked = _other_ends(store, namespace, gone)
        rewrite(LINKS, drop_with(gone, namespace))
        if len(gone) == len(lineages):  # nothing of the namespace is newer: every node goes
            rewrite(NODES, in_scope)
            return out
    else:
        turns = _lineages(store, TURNS, "turn_id", namespace, session_id)
        old_turns = {t for t, lin in turns.items() if lineage.predates(lin, fence)}
        rewrite(TURNS, lambda d: lineage.predating(d, in_scope(d), fence))
        gone, kept = _strike_session(store, namespace, session_id, old_turns, fence)
        rewrite(RECORDS, _ids_mask(gone), kept)
        out.unlinked = _other_ends(store, namespace, gone)
        rewrite(LINKS, drop_with(gone, namespace))
    node_gone, updated = _unlink_all(store, gone, embedder, namespace, session_id)
    rewrite(NODES, _ids_mask(node_gone), updated)
    return out


def _other_ends(store: Any, namespace: str, gone: set[str]) -> set[str]:
    """The records left at the other end of a link to one of `gone`."""
    ends = {e for x in store.links.of_namespace(namespace, gone) for e in (x.older_id, x.newer_id)}
    return ends - gone


def _strike_session(
    store: Any,
    namespace: str,
    session_id: str,
    turn_ids: set[str],
    fence: Mapping[int, int] | None,
) -> tuple[set[str], list[tuple[dict[str, Any], np.ndarray]]]:
    """Records to drop, and the rewritten rows of those that keep other sessions' support,
    once a session's older turns `turn_ids` are gone; records newer than the fence stay."""
    gone: set[str] = set()
    kept: list[tuple[dict[str, Any], np.ndarray]] = []
    for row, vec in _rows_of(store, RECORDS, namespace).values():
        if not lineage.predates(row.get(lineage.COLUMN), fence):
            continue  # everything in it came after the forget
        after = strike_session(row, session_id, turn_ids)
        if after is None:
            gone.add(row["id"])
        elif after is not row:
            kept.append((after, vec))
    return gone, kept


def expire(store: Any, cutoff: datetime, embedder: Embedder | None) -> Forgotten:
    """Remove turns, segments and records dated before `cutoff` (conversation dates: a turn's
    session date, else its own; a segment's session date; a record's first date), their
    supersession links and the node links to those records, with the same pruning as a forget. Rows without a date are
    kept."""
    db = store.db
    out = Forgotten()
    naive_cutoff = pa.scalar(cutoff.replace(tzinfo=None), pa.timestamp("us"))
    aware_cutoff = pa.scalar(
        cutoff if cutoff.tzinfo else cutoff.replace(tzinfo=UTC), pa.timestamp("us", tz="UTC")
    )

    def old_turns(d: pa.Table) -> Any:
        by_session = pc.less(d.column("session_date"), naive_cutoff)
        by_turn = pc.less(d.column("created_at"), aware_cutoff)
        return pc.fill_null(pc.coalesce(by_session, by_turn), False)

    def old_segments(d: pa.Table) -> Any:
        return pc.fill_null(pc.less(d.column("session_date"), naive_cutoff), False)

    removed, pruned = db.rewrite(TURNS, store.turns.text_column, old_turns)
    out.rows_removed[TURNS], out.versions_pruned = removed, pruned
    if (seg := db.table(SEGMENTS)) is not None:  # what other stages keep of them goes too
        dates = seg.search().select(["id", "session_date"]).limit(None).to_arrow()
        out.segments = dates.filter(old_segments(dates)).column("id").to_pylist()
    removed, pruned = db.rewrite(SEGMENTS, None, old_segments)
    out.rows_removed[SEGMENTS] = removed
    out.versions_pruned += pruned
    tbl = db.table(RECORDS)
    gone: set[str] = set()
    if tbl is not None:
        ids = tbl.search().select(["id", "created_at"]).limit(None).to_arrow()
        mask = pc.fill_null(pc.less(ids.column("created_at"), naive_cutoff), False)
        gone = set(ids.filter(mask).column("id").to_pylist())
    removed, pruned = db.rewrite(RECORDS, store.records.text_column, _ids_mask(gone))
    out.rows_removed[RECORDS] = removed
    out.versions_pruned += pruned
    removed, pruned = db.rewrite(LINKS, None, drop_with(gone))
    out.rows_removed[LINKS] = removed
    out.versions_pruned += pruned
    if gone:
        node_gone, updated = _unlink_all(store, gone, embedder)
        removed, pruned = db.rewrite(NODES, store.nodes.text_column, _ids_mask(node_gone), updated)
        out.rows_removed[NODES], out.rows_updated[NODES] = removed, len(updated)
        out.versions_pruned += pruned
    return out


def _unlink_all(
    store: Any,
    gone: set[str],
    embedder: Embedder | None,
    namespace: str | None = None,
    session_id: str | None = None,
) -> tuple[set[str], list[tuple[dict[str, Any], np.ndarray]]]:
    """Nodes to drop, and the rewritten rows of the others, once `gone` records are removed
    (and, given a session, its provenance struck from the namespace's nodes)."""
    tbl = store.db.table(NODES)
    if tbl is None:
        return set(), []
    q = tbl.search()
    if namespace is not None:
        q = q.where(namespace_filter(namespace))
    rows = q.select(["id", "record_ids", "session_id"]).limit(None).to_list()
    touched = [
        r["id"]
        for r in rows
        if gone.intersection(r["record_ids"] or ())
        or (session_id is not None and r["session_id"] == session_id)
    ]
    node_gone: set[str] = set()
    changed: list[dict[str, Any]] = []
    old_vectors: dict[str, tuple[tuple[str, tuple[str, ...]], np.ndarray]] = {}
    for row, vec in store.db.read_by_ids(tbl, touched).values():
        after = unlink(row, gone, session_id, store.nodes.max_node_text_chars)
        if after is None:
            node_gone.add(row["id"])
        elif after != row:
            changed.append(after)
            old_vectors[row["id"]] = (vector_source(row), vec)
    return node_gone, _recompose(store, changed, old_vectors, embedder)


def _ids_mask(ids: set[str]) -> Any:
    values = pa.array(sorted(ids), pa.string())
    return lambda d: pc.is_in(d.column("id"), value_set=values)


def _rows_of(store: Any, name: str, namespace: str) -> dict[str, tuple[dict[str, Any], np.ndarray]]:
    tbl = store.db.table(name)
    if tbl is None:
        return {}
    ids = [
        r["id"]
        for r in tbl.search()
        .where(namespace_filter(namespace))
        .select(["id"])
        .limit(None)
        .to_list()
    ]
    result: dict[str, tuple[dict[str, Any], np.ndarray]] = store.db.read_by_ids(tbl, ids)
    return result


def _lineages(
    store: Any, name: str, key: str, namespace: str, session_id: str | None = None
) -> dict[str, list[str] | None]:
    """`key` -> lineage of the rows of a namespace (or session) in table `name`, read without
    the rest of the rows (None for a table written before lineage was kept)."""
    tbl = store.db.table(name)
    if tbl is None:
        return {}
    has = lineage.COLUMN in tbl.schema.names
    rows = (
        tbl.search()
        .where(namespace_filter(namespace, session_id))
        .select([key, *([lineage.COLUMN] if has else [])])
        .limit(None)
        .to_list()
    )
    return {r[key]: r.get(lineage.COLUMN) for r in rows}


def _recompose(
    store: Any,
    rows: Sequence[dict[str, Any]],
    old: dict[str, tuple[tuple[str, tuple[str, ...]], np.ndarray]],
    embedder: Embedder | None,
) -> list[tuple[dict[str, Any], np.ndarray]]:
    """Vectors for changed nodes: the old one when its label and head records are unchanged,
    else a new one (the old vector was made of a removed record)."""
    out = [(row, old[row["id"]][1]) for row in rows]
    todo = [i for i, row in enumerate(rows) if vector_source(row) != old[row["id"]][0]]
    if todo:
        if embedder is None:
            raise RuntimeError("forgetting a session needs the embedder to recompute its nodes")
        fresh = node_vectors(store.db, [rows[i] for i in todo], embedder)
        for i, vec in zip(todo, fresh, strict=True):
            out[i] = (rows[i], vec)
    return out
