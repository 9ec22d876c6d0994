"""The indexer stage: batches of stage outputs into LanceDB, one writer per table.

Raw turns go to `turns`; record batches go to `records` and their evidence nodes to
`nodes`. Each is written with one `merge_insert` per table per batch, and the caller
commits input offsets only after `write` returns.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from schemas import RawTurn
from schemas.records import RecordBatch
from workers.embedding import Embedder
from workers.indexer.nodes import updates_of
from workers.store import EvidenceStore


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

    async def optimize(self, ann_min_rows: int) -> list[str]:
        async with self._turns_lock, self._records_lock:
            built: list[str] = await asyncio.to_thread(self.store.maybe_build_ann, ann_min_rows)
            await asyncio.to_thread(self.store.optimize)
        return built
