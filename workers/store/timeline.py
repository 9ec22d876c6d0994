"""A session as a person reads it: its raw turns a page at a time, the segments those turns
fall in (where each starts and ends, why it was closed) and, beside each segment, its records
with the turns they came from (turn -> segment -> record).

Also the per-namespace and per-session row counts an overview shows. Everything is read
without vectors, filtered by namespace first.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from workers.store.arrow import read_columns
from workers.store.database import Database
from workers.store.errors import TurnMissing
from workers.store.forget import segment_session
from workers.store.listing import list_turns
from workers.store.nodes import NODES
from workers.store.records import RECORDS
from workers.store.segments import SEGMENTS, SegmentsTable
from workers.store.sql import chunks, id_in, namespace_filter
from workers.store.turns import TURNS

_ROW_TABLES = (TURNS, RECORDS, NODES, SEGMENTS)


@dataclass(frozen=True)
class Timeline:
    turns: list[dict[str, Any]]  # one page, in conversation order
    segments: list[dict[str, Any]]  # overlapping the page, in order, each with its `records`
    total: int  # turns of the session
    page: int
    page_size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


def session_timeline(
    db: Database,
    namespace: str,
    session_id: str,
    page: int = 1,
    page_size: int = 100,
    turn_id: str | None = None,
) -> Timeline:
    """One page of the session's timeline; with `turn_id`, the page holding that turn
    (`TurnMissing` when the session holds no such turn)."""
    if turn_id is not None:
        page = _page_of(db, namespace, session_id, turn_id, page_size)
    turns = list_turns(db, namespace, session_id, page, page_size)
    segments: list[dict[str, Any]] = []
    if turns.items:
        seqs = [int(t["seq"]) for t in turns.items]
        segments = SegmentsTable(db).of_session(namespace, session_id, min(seqs), max(seqs))
        wanted = [rid for s in segments for rid in s["record_ids"]]
        records = _records(db, namespace, wanted)
        for s in segments:
            s["records"] = [records[rid] for rid in s["record_ids"] if rid in records]
    return Timeline(turns.items, segments, turns.total, turns.page, turns.page_size)


def _page_of(db: Database, namespace: str, session_id: str, turn_id: str, page_size: int) -> int:
    tbl = db.table(TURNS)
    ids: list[str] = []
    if tbl is not None:
        ids = (
            tbl.search()
            .where(namespace_filter(namespace, session_id), prefilter=True)
            .select(["turn_id", "seq", "idx"])
            .limit(None)
            .to_arrow()
            .sort_by([("seq", "ascending"), ("idx", "ascending")])
            .column("turn_id")
            .to_pylist()
        )
    if turn_id not in ids:
        raise TurnMissing(f"no turn {turn_id} in session {session_id} of namespace {namespace}")
    return ids.index(turn_id) // page_size + 1


def _records(db: Database, namespace: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    tbl = db.table(RECORDS)
    if tbl is None or not ids:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for chunk in chunks(list(dict.fromkeys(ids)), 500):
        rows = (
            tbl.search()
            .where(f"{namespace_filter(namespace)} AND {id_in(chunk)}", prefilter=True)
            .select(read_columns(tbl.schema))
            .limit(None)
            .to_list()
        )
        out.update((r["id"], r) for r in rows)
    return out


def namespace_rows(db: Database) -> dict[str, dict[str, int]]:
    """Rows per namespace in every table, and its sessions (those with raw turns)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_ROW_TABLES, 0))
    for name in _ROW_TABLES:
        for ns, n in _column(db, name, None, "namespace").items():
            out[ns][name] = n
    sessions = _distinct_pairs(db, TURNS, "namespace", "session_id")
    for ns, counts in out.items():
        counts["sessions"] = sessions.get(ns, 0)
    return dict(out)


def session_rows(db: Database, namespace: str) -> dict[str, dict[str, Any]]:
    """Per session of `namespace`: its turns (count, seq range, first and last conversation
    date), segments and records (a record counts in every session that produced it)."""
    out: dict[str, dict[str, Any]] = {}
    tbl = db.table(TURNS)
    if tbl is not None:
        data = _read(tbl, namespace, ["session_id", "seq", "session_date"])
        grouped = data.group_by("session_id").aggregate(
            [
                ("seq", "count"),
                ("seq", "min"),
                ("seq", "max"),
                ("session_date", "min"),
                ("session_date", "max"),
            ]
        )
        for row in grouped.to_pylist():
            out[row["session_id"]] = {
                "turns": row["seq_count"],
                "first_seq": row["seq_min"],
                "last_seq": row["seq_max"],
                "first_date": row["session_date_min"],
                "last_date": row["session_date_max"],
            }
    blank = {"turns": 0, "first_seq": None, "last_seq": None, "first_date": None, "last_date": None}
    for sid, n in _column(db, SEGMENTS, namespace, "session_id").items():
        out.setdefault(sid, dict(blank))["segments"] = n
    records: Counter[str] = Counter()
    tbl = db.table(RECORDS)
    if tbl is not None:
        for segs in _read(tbl, namespace, ["segment_ids"]).column("segment_ids").to_pylist():
            records.update({segment_session(s) for s in segs or []})
    for sid, n in records.items():
        out.setdefault(sid, dict(blank))["records"] = n
    for row in out.values():
        row.setdefault("segments", 0)
        row.setdefault("records", 0)
    return out


def _read(tbl: Any, namespace: str | None, columns: list[str]) -> pa.Table:
    q = tbl.search()
    if namespace is not None:
        q = q.where(namespace_filter(namespace), prefilter=True)
    return q.select(columns).limit(None).to_arrow()


def _column(db: Database, name: str, namespace: str | None, column: str) -> dict[str, int]:
    """Rows of table `name` (of `namespace`, or all) per value of `column`."""
    tbl = db.table(name)
    if tbl is None:
        return {}
    return _column_counts(_read(tbl, namespace, [column]).column(column))


def _distinct_pairs(db: Database, name: str, key: str, column: str) -> dict[str, int]:
    """Per value of `key`, the distinct values of `column` beside it."""
    tbl = db.table(name)
    if tbl is None:
        return {}
    pairs = _read(tbl, None, [key, column]).group_by([key, column]).aggregate([])
    return _column_counts(pairs.column(key))


def _column_counts(values: pa.ChunkedArray) -> dict[str, int]:
    return {c["values"]: int(c["counts"]) for c in pc.value_counts(values).to_pylist()}
