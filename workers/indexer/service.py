"""The indexer stage: batches of stage outputs into LanceDB, one writer per table.

Raw turns go to `turns`; record batches go to `records`, their evidence nodes to `nodes`
and the supersessions and conflicts among the records to `links` (workers.indexer.linking). Each is written with one `merge_insert` per table per batch, and the caller
commits input offsets only after `write` returns. Maintenance (`optimize`) runs beside the
writes, never holding their locks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from schemas import RawTurn
from schemas.records import NodeType, RecordBatch
from workers.embedding import Embedder
from workers.forget import Fences, Source
from workers.indexer.linking import links_of, relinked
from workers.indexer.nodes import ALL_NODE_TYPES, updates_of
from workers.store import ALL_TABLES, NODES, RECORDS, TABLES, TURNS, EvidenceStore, Forgotten

T = TypeVar("T")
# told, after a durable write, the namespaces written (None: every one) and the version
# each searched table holds now (streams.written: the query service's snapshots keep)
OnWritten = Callable[[Iterable[str] | None, Mapping[str, int]], Awaitable[None]]


@dataclass
class OptimizeReport:
    built: list[str] = field(default_factory=list)  # ANN indexes built
    optimized: list[str] = field(default_factory=list)  # tables compacted
    deferred: list[str] = field(default_factory=list)  # left for the next call: budget spent


@dataclass
class IndexBatch:
    """What to write; `*_sources[i]` is the lineage of item i (workers.forget), checked
    against the forget fences under the table's lock, so that nothing produced before a
    forget is written after it."""

    turns: list[RawTurn] = field(default_factory=list)
    records: list[RecordBatch] = field(default_factory=list)
    turn_sources: list[Source | None] | None = None
    record_sources: list[Source | None] | None = None


class IndexerService:
    def __init__(
        self,
        store: EvidenceStore,
        embedder: Embedder | None = None,
        fences: Fences | None = None,
        node_types: frozenset[NodeType] = ALL_NODE_TYPES,
        on_written: OnWritten | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.fences = fences
        self.node_types = node_types  # the evidence-node types built (and embedded)
        self.on_written = on_written
        # one writer per table: turns and records/nodes are written independently, so raw
        # turns stay searchable at once however long record embedding takes
        self._turns_lock = asyncio.Lock()
        self._records_lock = asyncio.Lock()
        self._next_table = 0  # where the next optimize starts: tables take turns

    async def write(
        self,
        batch: IndexBatch,
        on_turns: Callable[[list[RawTurn]], Awaitable[None]] | None = None,
    ) -> dict[str, int]:
        """Write the batch; `on_turns` gets the turns written, before the lock is let go
        (a forget cannot come in between and leave a watermark of what it removed)."""
        written: dict[str, int] = {}
        if batch.turns:
            async with self._turns_lock:
                turns, turn_sources = await self._live(
                    batch.turns, batch.turn_sources, lambda x: (x.namespace, x.session_id)
                )
                written["turns"] = await asyncio.to_thread(
                    self.store.turns.upsert, turns, turn_sources
                )
                written["turns_forgotten"] = len(batch.turns) - len(turns)
                if turns:
                    await self._written({t.namespace for t in turns}, (TURNS,))
                    if on_turns is not None:
                        await on_turns(turns)
        if batch.records:
            if self.embedder is None:
                raise RuntimeError("the indexer needs an embedder to write records and nodes")
            async with self._records_lock:
                records, record_sources = await self._live(
                    batch.records, batch.record_sources, lambda x: (x.namespace, x.session_id)
                )
                counts = await asyncio.to_thread(
                    self._write_records, records, record_sources, self.embedder
                )
                if records:
                    await self._written({b.namespace for b in records}, (RECORDS, NODES))
            written.update(counts)
            written["batches_forgotten"] = len(batch.records) - len(records)
        return written

    async def _live(
        self,
        items: list[T],
        sources: list[Source | None] | None,
        names: Callable[[T], tuple[str, str]],
    ) -> tuple[list[T], list[Source | None]]:
        """`items` (and their sources) without those produced before a forget of their
        namespace or session."""
        srcs: list[Source | None] = list(sources) if sources is not None else [None] * len(items)
        if self.fences is None:
            return items, srcs
        stale = await self.fences.stale([(*names(x), s) for x, s in zip(items, srcs, strict=True)])
        live = [i for i, gone in enumerate(stale) if not gone]
        return [items[i] for i in live], [srcs[i] for i in live]

    async def forget(
        self, namespace: str, session_id: str | None, exchanges_end: dict[int, int]
    ) -> Forgotten:
        """Raise the fence, then remove the rows that predate it (both writers held: no
        batch read before the fence is written after the removal). A forget that names no
        partition fences nothing and removes every row of the namespace or session."""
        async with self._turns_lock, self._records_lock:
            if self.fences is not None:
                await self.fences.raise_to(namespace, session_id, exchanges_end)
            done = await asyncio.to_thread(
                self.store.forget, namespace, session_id, self.embedder, exchanges_end or None
            )
            if done.unlinked:
                await asyncio.to_thread(self._relink, namespace, done.unlinked)
            # every namespace: the query service then drops every snapshot older than the
            # forget, the forgotten namespace's among them, at the first read after it
            await self._written(None, TABLES)
            return done

    def _relink(self, namespace: str, record_ids: set[str]) -> None:
        self.store.links.upsert(relinked(self.store, namespace, record_ids))

    async def _written(self, namespaces: Iterable[str] | None, tables: Sequence[str]) -> None:
        if self.on_written is not None:
            await self.on_written(namespaces, await asyncio.to_thread(self.store.versions, tables))

    def _write_records(
        self, batches: list[RecordBatch], sources: list[Source | None], embedder: Embedder
    ) -> dict[str, int]:
        updates = updates_of(batches, self.node_types)
        counts = self.store.upsert_batches(batches, updates, embedder, sources)
        # after the records they join: a reader never meets a link to a record not yet stored
        counts["links_written"] = self.store.links.upsert(links_of(self.store, batches))
        return counts

    async def expire(self, retention_days: float) -> Forgotten:
        """Retention: remove what is older than `retention_days` (both writers held)."""
        cutoff = datetime.now(UTC) - timedelta(days=retention_days)
        async with self._turns_lock, self._records_lock:
            done = await asyncio.to_thread(self.store.expire, cutoff, self.embedder)
            if any(done.rows_removed.values()) or any(done.rows_updated.values()):
                await self._written(None, TABLES)
            return done

    async def optimize(self, ann_min_rows: int, budget_s: float = 60.0) -> OptimizeReport:
        """Build due ANN indexes and compact, one table at a time, holding no writer's lock.

        LanceDB commits optimistically: a compaction or index build beside a merge either
        lets the write retry its commit (`upsert_rows`) or is itself skipped until the next
        call, so writes never wait behind maintenance. No table is started once `budget_s` is
        spent (at least one per call); the next call starts with the first one left over.
        """
        deadline = time.monotonic() + budget_s
        order = [*ALL_TABLES[self._next_table :], *ALL_TABLES[: self._next_table]]
        report = OptimizeReport()
        for i, name in enumerate(order):
            if i > 0 and time.monotonic() >= deadline:
                report.deferred = order[i:]
                self._next_table = ALL_TABLES.index(name)
                return report
            report.built += await asyncio.to_thread(
                self.store.maybe_build_ann, ann_min_rows, (name,)
            )
            report.optimized += await asyncio.to_thread(self.store.optimize, [name])
        self._next_table = 0
        return report
