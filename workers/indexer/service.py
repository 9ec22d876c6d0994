"""The indexer stage: batches of stage outputs into LanceDB, one writer per table.

Raw turns go to `turns`; record batches go to `records` and their evidence nodes to
`nodes`. Each is written with one `merge_insert` per table per batch, and the caller
commits input offsets only after `write` returns. Maintenance (`optimize`) runs beside the
writes, never holding their locks.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from schemas import RawTurn
from schemas.records import RecordBatch
from workers.embedding import Embedder
from workers.indexer.nodes import updates_of
from workers.store import TABLES, EvidenceStore


@dataclass
class OptimizeReport:
    built: list[str] = field(default_factory=list)  # ANN indexes built
    optimized: list[str] = field(default_factory=list)  # tables compacted
    deferred: list[str] = field(default_factory=list)  # left for the next call: budget spent


@dataclass
class IndexBatch:
    turns: list[RawTurn] = field(default_factory=list)
    records: list[RecordBatch] = field(default_factory=list)


class IndexerService:
    def __init__(self, store: EvidenceStore, embedder: Embedder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        # one writer per table: turns and records/nodes are written independently, so raw
        # turns stay searchable at once however long record embedding takes
        self._turns_lock = asyncio.Lock()
        self._records_lock = asyncio.Lock()
        self._next_table = 0  # where the next optimize starts: tables take turns

    async def write(self, batch: IndexBatch) -> dict[str, int]:
        written: dict[str, int] = {}
        if batch.turns:
            async with self._turns_lock:
                written["turns"] = await asyncio.to_thread(self.store.turns.upsert, batch.turns)
        if batch.records:
            if self.embedder is None:
                raise RuntimeError("the indexer needs an embedder to write records and nodes")
            async with self._records_lock:
                counts = await asyncio.to_thread(self._write_records, batch.records, self.embedder)
            written.update(counts)
        return written

    def _write_records(self, batches: list[RecordBatch], embedder: Embedder) -> dict[str, int]:
        return self.store.upsert_batches(batches, updates_of(batches), embedder)

    async def optimize(self, ann_min_rows: int, budget_s: float = 60.0) -> OptimizeReport:
        """Build due ANN indexes and compact, one table at a time, holding no writer's lock.

        LanceDB commits optimistically: a compaction or index build beside a merge either
        lets the write retry its commit (`upsert_rows`) or is itself skipped until the next
        call, so writes never wait behind maintenance. No table is started once `budget_s` is
        spent (at least one per call); the next call starts with the first one left over.
        """
        deadline = time.monotonic() + budget_s
        order = [*TABLES[self._next_table :], *TABLES[: self._next_table]]
        report = OptimizeReport()
        for i, name in enumerate(order):
            if i > 0 and time.monotonic() >= deadline:
                report.deferred = order[i:]
                self._next_table = TABLES.index(name)
                return report
            report.built += await asyncio.to_thread(
                self.store.maybe_build_ann, ann_min_rows, (name,)
            )
            report.optimized += await asyncio.to_thread(self.store.optimize, [name])
        self._next_table = 0
        return report
