"""The `records` table: memory records with their provenance (DESIGN §7, paper App. C.2).

A record id seen again keeps one row with its provenance (evidence turns, segments)
unioned: a read-merge-write that is idempotent, so a redelivered batch leaves the table
as it was, and order-independent (the row does not depend on which segment arrived first,
hence not on how many encoders published them). It assumes one writer per record id at a
time: `memory.records` is keyed by namespace, so one indexer owns a namespace's rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.records import MemoryRecord, RecordBatch
from workers.embedding import Embedder
from workers.forget import Source
from workers.store import lineage
from workers.store.arrow import ID, Pending, naive
from workers.store.database import DIM_KEY, MODEL_KEY, Database, MergedTable
from workers.store.snapshots import column_names
from workers.store.sql import namespace_filter

RECORDS = "records"
TEXT_COLUMN = "search_text"  # the normalized text and the record's context: embedded, indexed
OLD_TEXT_COLUMN = "normalized_text"  # what tables written before `search_text` index
SUBJECT_CHARS = 1_000  # of a record's text, searched for the records about its subject
_NOT_WORD = re.compile(r"[^\w\s]")  # words only: no full-text query syntax


def records_schema(dim: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            ID,  # the record id (content-derived, namespaced)
            ("namespace", pa.string()),
            ("memory_type", pa.string()),
            ("semantic_text", pa.string()),
            ("normalized_text", pa.string()),
            ("context", pa.string()),
            (TEXT_COLUMN, pa.string()),
            ("entities", pa.list_(pa.string())),
            ("tags", pa.list_(pa.string())),
            ("t_ref", pa.string()),
            ("t_valid_from", pa.string()),
            ("t_valid_to", pa.string()),
            ("evidence", pa.list_(pa.string())),
            ("source_session", pa.string()),
            ("segment_id", pa.string()),  # the first segment that produced the record
            ("segment_ids", pa.list_(pa.string())),
            ("source_role", pa.string()),
            ("confidence", pa.float64()),
            ("created_at", pa.timestamp("us")),
            ("vector", pa.list_(pa.float32(), dim)),
            (lineage.COLUMN, pa.list_(pa.string())),  # workers.store.lineage
        ],
        metadata={MODEL_KEY: model, DIM_KEY: str(dim)},
    )


Occurrence = tuple[MemoryRecord, Source | None]  # a record and the lineage of its batch


def occurrences(
    batches: Sequence[RecordBatch], sources: Sequence[Source | None] | None = None
) -> list[Occurrence]:
    srcs = list(sources) if sources is not None else [None] * len(batches)
    return [(r, src) for b, src in zip(batches, srcs, strict=True) for r in b.records]


class RecordsTable(MergedTable[Occurrence]):
    name = RECORDS
    text_column = TEXT_COLUMN

    def __init__(self, db: Database) -> None:
        super().__init__(db, records_schema(db.dim, db.model))
        self._migrated = False

    def table(self, create: bool = False) -> Any | None:
        """The table; a writer (`create`) migrates it first (`migrate`)."""
        if create:
            self.migrate()
        return super().table(create)

    def migrate(self) -> None:
        """Writers only: a table of an earlier version gets the `context` and `search_text`
        columns (empty, and its normalized text); readers use what is there meanwhile."""
        tbl = None if self._migrated else super().table()
        if tbl is not None and TEXT_COLUMN not in tbl.schema.names:
            tbl.add_columns({"context": "''", TEXT_COLUMN: OLD_TEXT_COLUMN})
        self._migrated = self._migrated or tbl is not None

    def text_column_of(self, tbl: Any) -> str:
        """The full-text column: `search_text`, or on a table not migrated yet, the old one."""
        return TEXT_COLUMN if TEXT_COLUMN in column_names(tbl, RECORDS) else OLD_TEXT_COLUMN

    def _merge(self, tbl: Any, records: Sequence[Occurrence], embedder: Embedder) -> Pending:
        seen: dict[str, list[Occurrence]] = {}
        for rec, src in records:
            seen.setdefault(rec.record_id, []).append((rec, src))
        existing = self.db.read_by_ids(tbl, list(seen))
        pending = Pending()
        for rid, found in seen.items():
            old, vector = existing.get(rid, (None, None))
            row = dict(old) if old else _record_row(found[0][0])
            for rec, src in found:
                row = _merge_record(row, rec)
                row[lineage.COLUMN] = lineage.merge(
                    row.get(lineage.COLUMN) or [], [lineage.token(src)]
                )
            if row != old:
                text = row[TEXT_COLUMN]  # the earliest wording: embed it if it changed
                keep = vector if old is not None and old.get(TEXT_COLUMN) == text else None
                pending.add(row, keep, text)
        return pending

    # -- reads --------------------------------------------------------------------------------

    def search_vectors(
        self, namespace: str, vectors: np.ndarray, limit: int
    ) -> list[list[dict[str, Any]]]:
        return self.db.search_vectors(RECORDS, namespace, vectors, limit)

    def search_vector(self, namespace: str, vec: np.ndarray, limit: int) -> list[dict[str, Any]]:
        return self.search_vectors(namespace, np.asarray([vec]), limit)[0]

    def search_text(self, namespace: str, text: str, limit: int) -> list[dict[str, Any]]:
        tbl = self.table()
        if tbl is None:
            return []
        return self.db.search_text(RECORDS, self.text_column_of(tbl), namespace, text, limit)

    def warm(self, namespace: str) -> None:
        tbl = self.table()
        if tbl is not None:
            self.db.warm(RECORDS, namespace, self.text_column_of(tbl))

    def by_ids(self, namespace: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Records of `namespace` among `ids`, in the order of `ids` (missing ones skipped)."""
        tbl = self.table()
        if tbl is None or not ids:
            return []
        ids = list(dict.fromkeys(ids))
        snap = self.db.snapshot(tbl, RECORDS, namespace)
        rows = snap.by_ids(ids) if snap is not None else None
        if rows is not None:
            return rows
        found = self.db.read_by_ids(tbl, ids, where=namespace_filter(namespace))
        return [found[i][0] for i in ids if i in found]

    def of_kind(self, namespace: str, memory_type: str, source_role: str) -> list[dict[str, Any]]:
        """The namespace's records of one memory type said by one role, in table order."""
        match = {"memory_type": [memory_type], "source_role": [source_role]}
        return self.db.matching(RECORDS, namespace, match)


def value_counts(db: Database, name: str, namespace: str, column: str) -> dict[str, int]:
    """Rows of `namespace` in table `name` per value of `column`."""
    tbl = db.table(name)
    if tbl is None:
        return {}
    data = tbl.search().where(namespace_filter(namespace)).select([column]).limit(None).to_arrow()
    counts = pc.value_counts(data.column(column)).to_pylist()
    return {c["values"]: int(c["counts"]) for c in sorted(counts, key=lambda c: c["values"])}


def _record_row(rec: MemoryRecord) -> dict[str, Any]:
    return {
        "id": rec.record_id,
        "namespace": rec.namespace,
        "memory_type": rec.memory_type.value,
        "semantic_text": rec.semantic_text,
        "normalized_text": rec.normalized_text,
        "context": rec.context,
        TEXT_COLUMN: rec.search_text(),
        "entities": [],
        "tags": [],
        "t_ref": "",
        "t_valid_from": "",
        "t_valid_to": "",
        "evidence": [],
        "source_session": rec.source_session,
        "segment_id": rec.segment_id,
        "segment_ids": [],
        "source_role": "",
        "confidence": 0.0,
        "created_at": None,
    }


def _merge_record(row: dict[str, Any], rec: MemoryRecord) -> dict[str, Any]:
    """`row` with one more occurrence of its statement: provenance unioned, gaps filled.

    Every step is a union, a min or a max, so merging the same occurrence twice changes
    nothing and occurrences merge to the same row in any order (lists keep arrival order;
    as sets they agree). The wording, session and segment of the row are those of the
    earliest occurrence (by conversation date, then segment id), not of the first to arrive.
    """
    out = dict(row)
    for column, values in (
        ("evidence", rec.evidence),
        ("segment_ids", [rec.segment_id]),
        ("entities", rec.entities),
        ("tags", rec.tags),
    ):
        out[column] = list(dict.fromkeys([*(row[column] or []), *values]))
    created = naive(rec.created_at)
    if _occurrence(created, rec.segment_id) < _occurrence(row["created_at"], row["segment_id"]):
        out["semantic_text"] = rec.semantic_text
        out["normalized_text"] = rec.normalized_text
        out["context"] = rec.context
        out[TEXT_COLUMN] = rec.search_text()
        out["source_session"] = rec.source_session
        out["segment_id"] = rec.segment_id
    for column in ("t_ref", "t_valid_from", "t_valid_to"):
        out[column] = _least_filled(row[column], getattr(rec.temporal, column))
    out["source_role"] = _least_filled(row["source_role"], rec.source_role)
    out["confidence"] = max(float(row["confidence"] or 0.0), rec.confidence)
    out["created_at"] = min(
        (d for d in (row["created_at"], created) if d is not None), default=None
    )
    return out


def _occurrence(created: datetime | None, segment_id: str) -> tuple[bool, datetime, str]:
    """The order of a statement's occurrences: dated before undated, earliest first."""
    return (created is None, created or datetime.min, segment_id)


def _least_filled(a: str | None, b: str | None) -> str:
    """The smaller of two values, ignoring empty ones: commutative, unlike "first wins"."""
    filled = [v for v in (a, b) if v]
    return min(filled) if filled else ""


STATEMENT_COLUMNS = (
    "id",
    "semantic_text",
    "source_role",
    "source_session",
    "segment_id",
    "created_at",
    "evidence",
)


def statements(db: Database, namespace: str, limit: int) -> list[dict[str, Any]]:
    """What the supersession rules read of a namespace's records (no vectors), the latest
    `limit` by conversation date."""
    tbl = db.table(RECORDS)
    if tbl is None:
        return []
    rows: list[dict[str, Any]] = (
        tbl.search()
        .where(namespace_filter(namespace))
        .select(list(STATEMENT_COLUMNS))
        .limit(None)
        .to_list()
    )
    rows.sort(key=lambda r: (r["created_at"] or datetime.min, r["segment_id"]))
    return rows[-limit:]


def statements_about(
    db: Database, namespace: str, ids: Sequence[str], limit: int
) -> list[dict[str, Any]]:
    """What the supersession rules read of the records `ids` and of those about the same
    subject: for each, the `limit` best of the records table's full-text index over its
    own words (no vectors). Cost grows with the batch, not with the namespace."""
    tbl = db.table(RECORDS)
    if tbl is None or not ids:
        return []
    cols = list(STATEMENT_COLUMNS)
    own = db.read_by_ids(tbl, list(ids), where=namespace_filter(namespace), columns=cols)
    found = {i: {c: row.get(c) for c in cols} for i, (row, _) in own.items()}
    column = TEXT_COLUMN if TEXT_COLUMN in tbl.schema.names else OLD_TEXT_COLUMN
    for row in list(found.values()):
        words = " ".join(_NOT_WORD.sub(" ", row["semantic_text"] or "").split())[:SUBJECT_CHARS]
        for hit in db.search_text(RECORDS, column, namespace, words, limit, None, cols):
            found.setdefault(hit["id"], {c: hit.get(c) for c in cols})
    rows = list(found.values())
    rows.sort(key=lambda r: (r["created_at"] or datetime.min, r["segment_id"]))
    return rows


def sample_texts(db: Database, namespace: str, limit: int) -> list[str]:
    """Up to `limit` of a namespace's record texts, any of them: enough to tell the words
    an encoder repeats everywhere (the speaker's name, the project) without reading all."""
    tbl = db.table(RECORDS)
    if tbl is None:
        return []
    rows = tbl.search().where(namespace_filter(namespace)).select(["semantic_text"]).limit(limit)
    return [r["semantic_text"] or "" for r in rows.to_list()]
