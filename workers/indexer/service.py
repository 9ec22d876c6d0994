"""The indexer stage: batches of stage outputs into LanceDB, one writer per table.

Each kind of input (raw turns now; records and evidence nodes with the encoder) is
a list in `IndexBatch`, written with one `merge_insert` per table per batch. The
caller commits input offsets only after `write` returns.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from schemas import RawTurn
from workers.indexer.store import EvidenceStore


@dataclass
class IndexBatch:
    turns: list[RawTurn] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.turns)


class IndexerService:
    def __init__(self, store: EvidenceStore) -> None:
        self.store = store
        self._lock = asyncio.Lock()  # writes and optimize never overlap

    async def write(self, batch: IndexBatch) -> dict[str, int]:
        async with self._lock:
            written = await asyncio.to_thread(self.store.upsert_turns, batch.turns)
        return {"turns": written}

    async def optimize(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self.store.optimize)
