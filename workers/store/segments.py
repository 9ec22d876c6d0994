"""The `segments` table: one row per finalized segment, for session timelines.

A segment's records say which segment produced them, but not where the segment starts and
ends in its session nor why it was closed; this table keeps that (the finalize reason and the
boundary signals of the closing decision), with the ids of the records the segment yielded,
so that a timeline can show turn -> segment -> record. It holds no vectors and no memory
text, and is written from the same record batches as `records`, after them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from schemas.records import RecordBatch
from workers.forget import Source
from workers.store import lineage
from workers.store.arrow import ID, naive
from workers.store.database import Database, Table
from workers.store.sql import ID_CHUNK, chunks, id_in, namespace_filter
from workers.store.writes import upsert_rows

SEGMENTS = "segments"


class Place(NamedTuple):
    """Where a segment was said, in the order `said_after` reads."""

    date: datetime
    session_id: str
    segment_index: int


When = tuple[datetime, str, int]  # when something was said: date, session, place in it


def said_after(a: When, b: When) -> bool:
    """`a` (date, session, position in it) said after `b`: a later date, or later in one
    session; two sessions of one date are not ordered."""
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] == b[1] and a[2] > b[2]


def segments_schema() -> pa.Schema:
    return pa.schema(
        [
            ID,  # the segment id: namespace/session_id/n
            ("namespace", pa.string()),
            ("session_id", pa.string()),
            ("segment_index", pa.int64()),
            ("reason", pa.string()),  # FinalizeReason, "" when not known
            ("signals", pa.string()),  # BoundarySignals as JSON, "" when none
            ("first_turn_id", pa.string()),
            ("last_turn_id", pa.string()),
            ("first_seq", pa.int64()),  # null when not known
            ("last_seq", pa.int64()),
            ("exchanges", pa.int64()),
            ("tokens", pa.int64()),
            ("session_date", pa.timestamp("us")),
            ("encoder", pa.string()),
            ("record_ids", pa.list_(pa.string())),
            (lineage.COLUMN, pa.list_(pa.string())),
        ]
    )


class SegmentsTable(Table):
    name = SEGMENTS
    text_column = None  # nothing to search by text

    def __init__(self, db: Database) -> None:
        super().__init__(db, segments_schema())

    def upsert(
        self, batches: Sequence[RecordBatch], sources: Sequence[Source | None] | None = None
    ) -> int:
        """One merge_insert for the batches' segments; a redelivered batch rewrites its row."""
        if not batches:
            return 0
        srcs = list(sources) if sources is not None else [None] * len(batches)
        rows = {b.segment_id: _row(b, src) for b, src in zip(batches, srcs, strict=True)}
        tbl = self.table(create=True)
        assert tbl is not None
        upsert_rows(tbl, pa.Table.from_pylist(list(rows.values()), schema=tbl.schema))
        self.db.ensure_indexes(SEGMENTS, tbl, None)
        return len(rows)

    def of_session(
        self,
        namespace: str,
        session_id: str,
        first_seq: int | None = None,
        last_seq: int | None = None,
    ) -> list[dict[str, Any]]:
        """The session's segments in order, those overlapping `first_seq..last_seq` when given
        (a segment whose seqs are not known is always kept)."""
        tbl = self.table()
        if tbl is None:
            return []
        data = (
            tbl.search()
            .where(namespace_filter(namespace, session_id), prefilter=True)
            .select([n for n in tbl.schema.names if n != lineage.COLUMN])
            .limit(None)
            .to_arrow()
        )
        if first_seq is not None and last_seq is not None and data.num_rows:
            ends_after = pc.fill_null(pc.greater_equal(data.column("last_seq"), first_seq), True)
            starts_before = pc.fill_null(pc.less_equal(data.column("first_seq"), last_seq), True)
            data = data.filter(pc.and_(ends_after, starts_before))
        rows: list[dict[str, Any]] = data.sort_by([("segment_index", "ascending")]).to_pylist()
        for row in rows:
            row["signals"] = orjson.loads(row["signals"]) if row["signals"] else None
            row["reason"] = row["reason"] or None
        return rows

    def places(self, namespace: str, ids: Sequence[str]) -> dict[str, Place]:
        """Where each segment of `ids` was said: its session's date, the session and the
        segment's place in it (segments not stored, or of no date, are left out)."""
        tbl = self.table()
        out: dict[str, Place] = {}
        if tbl is None:
            return out
        for chunk in chunks(list(dict.fromkeys(ids)), ID_CHUNK):
            data = (
                tbl.search()
                .where(f"({namespace_filter(namespace)}) AND {id_in(chunk)}")
                .select(["id", "session_id", "segment_index", "session_date"])
                .limit(None)
                .to_arrow()
            )
            for row in data.to_pylist():
                if row["session_date"] is not None:
                    out[row["id"]] = Place(
                        row["session_date"], row["session_id"], row["segment_index"]
                    )
        return out


def _row(b: RecordBatch, src: Source | None) -> dict[str, Any]:
    return {
        "id": b.segment_id,
        "namespace": b.namespace,
        "session_id": b.session_id,
        "segment_index": b.segment_index,
        "reason": b.reason.value if b.reason else "",
        "signals": b.signals.model_dump_json() if b.signals else "",
        "first_turn_id": b.first_turn_id,
        "last_turn_id": b.last_turn_id,
        "first_seq": b.first_seq,
        "last_seq": b.last_seq,
        "exchanges": b.exchanges,
        "tokens": b.tokens,
        "session_date": naive(b.session_date),
        "encoder": b.encoder,
        "record_ids": list(dict.fromkeys(r.record_id for r in b.records)),
        lineage.COLUMN: [lineage.token(src)],
    }
