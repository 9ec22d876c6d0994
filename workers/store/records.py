"""The `records` table: memory records with their provenance (DESIGN §7, paper App. C.2).

A record id seen again keeps one row with its provenance (evidence turns, segments)
unioned: a read-merge-write that is idempotent, so a redelivered batch leaves the table
as it was. This assumes one writer per record id at a time (the indexer stage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.records import MemoryRecord
from workers.store.database import (
    DIM_KEY,
    MODEL_KEY,
    Database,
    MergedTable,
    Pending,
    naive,
    namespace_filter,
)

RECORDS = "records"
TEXT_COLUMN = "normalized_text"


def records_schema(dim: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.string()),  # the record id (content-derived, namespaced)
            ("namespace", pa.string()),
            ("memory_type", pa.string()),
            ("semantic_text", pa.string()),
            ("normalized_text", pa.string()),
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
        ],
        metadata={MODEL_KEY: model, DIM_KEY: str(dim)},
    )


class RecordsTable(MergedTable[MemoryRecord]):
    name = RECORDS
    text_column = TEXT_COLUMN

    def __init__(self, db: Database) -> None:
        super().__init__(db, records_schema(db.dim, db.model))

    def _merge(self, tbl: Any, records: Sequence[MemoryRecord]) -> Pending:
        seen: dict[str, list[MemoryRecord]] = {}
        for rec in records:
            seen.setdefault(rec.record_id, []).append(rec)
        existing = self.db.read_by_ids(tbl, list(seen))
        pending = Pending()
        for rid, occurrences in seen.items():
            old, vector = existing.get(rid, (None, None))
            row = dict(old) if old else _record_row(occurrences[0])
            for rec in occurrences:
                row = _merge_record(row, rec)
            if row != old:
                pending.add(row, vector, row["normalized_text"])
        return pending

    # -- reads --------------------------------------------------------------------------------

    def search_vectors(
        self, namespace: str, vectors: np.ndarray, limit: int
    ) -> list[list[dict[str, Any]]]:
        return self.db.search_vectors(
            RECORDS, namespace_filter(namespace), vectors, limit, namespace
        )

    def search_vector(self, namespace: str, vec: np.ndarray, limit: int) -> list[dict[str, Any]]:
        return self.search_vectors(namespace, np.asarray([vec]), limit)[0]

    def search_text(self, namespace: str, text: str, limit: int) -> list[dict[str, Any]]:
        return self.db.search_text(RECORDS, TEXT_COLUMN, namespace_filter(namespace), text, limit)

    def by_ids(self, namespace: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Records of `namespace` among `ids`, in the order of `ids` (missing ones skipped)."""
        tbl = self.table()
        if tbl is None or not ids:
            return []
        found = self.db.read_by_ids(tbl, ids, where=namespace_filter(namespace))
        return [found[i][0] for i in dict.fromkeys(ids) if i in found]


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

    Every step is a union, a max or a fill of an empty field, so merging the same
    occurrence twice changes nothing.
    """
    out = dict(row)
    for column, values in (
        ("evidence", rec.evidence),
        ("segment_ids", [rec.segment_id]),
        ("entities", rec.entities),
        ("tags", rec.tags),
    ):
        out[column] = list(dict.fromkeys([*(row[column] or []), *values]))
    for column in ("t_ref", "t_valid_from", "t_valid_to"):
        out[column] = row[column] or getattr(rec.temporal, column)
    out["source_role"] = row["source_role"] or rec.source_role
    out["confidence"] = max(float(row["confidence"] or 0.0), rec.confidence)
    created = naive(rec.created_at)
    out["created_at"] = min(
        (d for d in (row["created_at"], created) if d is not None), default=None
    )
    return out
