"""The evidence store: the LanceDB tables the indexer writes and the query stage reads.

`EvidenceStore` bundles one connection (`Database`) with its tables: `turns` (raw turns),
`records` (memory records) and `nodes` (evidence nodes), which are searched, `segments`
(where each segment sits in its session and why it was closed), which timelines show, and
`links` (which record supersedes or contradicts which), which the query and histories read.
One instance per process; reads are safe from threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from schemas.records import RecordBatch
from workers.embedding import Embedder
from workers.errors import PRUNED_READ_ATTEMPTS, read_pruned
from workers.forget import Source
from workers.store.database import EXACT_MAX_ROWS, Database
from workers.store.errors import EmbeddingMismatch, StoreError
from workers.store.forget import Forgotten, expire, forget
from workers.store.links import LINKS, LinksTable
from workers.store.nodes import NODES, NodesTable, NodeUpdate
from workers.store.records import RECORDS, RecordsTable, occurrences, value_counts
from workers.store.segments import SEGMENTS, SegmentsTable
from workers.store.snapshots import consistent_reads
from workers.store.sql import namespace_filter
from workers.store.turns import TURNS, TurnsTable
from workers.text.passages import PASSAGE_TOKENS

T = TypeVar("T")
TABLES = (TURNS, RECORDS, NODES)  # the searched tables (with vectors)
ALL_TABLES = (*TABLES, SEGMENTS, LINKS)

__all__ = [
    "ALL_TABLES",
    "LINKS",
    "NODES",
    "RECORDS",
    "SEGMENTS",
    "TABLES",
    "TURNS",
    "consistent_reads",
    "Database",
    "EmbeddingMismatch",
    "EvidenceStore",
    "Forgotten",
    "StoreError",
    "namespace_filter",
]


class EvidenceStore:
    def __init__(
        self,
        uri: str,
        embedding_model: str,
        dim: int,
        read_consistency_s: float = 0.0,
        exact_max_rows: int = EXACT_MAX_ROWS,
        max_node_records: int = 64,
        max_node_text_chars: int = 2000,
        storage_options: Mapping[str, str] | None = None,
        snapshot_rows: int = 0,
        passage_tokens: int = PASSAGE_TOKENS,
    ) -> None:
        self.db = Database(
            uri,
            embedding_model,
            dim,
            read_consistency_s,
            exact_max_rows,
            storage_options,
            snapshot_rows,
        )
        self.turns = TurnsTable(self.db, passage_tokens)
        self.records = RecordsTable(self.db)
        self.nodes = NodesTable(self.db, max_node_records, max_node_text_chars)
        self.segments = SegmentsTable(self.db)
        self.links = LinksTable(self.db)
        self.tables: dict[
            str, TurnsTable | RecordsTable | NodesTable | SegmentsTable | LinksTable
        ] = {t.name: t for t in (self.turns, self.records, self.nodes, self.segments, self.links)}

    @property
    def uri(self) -> str:
        return self.db.uri

    @property
    def model(self) -> str:
        return self.db.model

    @property
    def dim(self) -> int:
        return self.db.dim

    def table(self, name: str, create: bool = False) -> Any | None:
        """An open LanceDB table by name; None when it does not exist yet."""
        return self.tables[name].table(create)

    def versions(self, names: Sequence[str]) -> dict[str, int]:
        """The current version of each existing table of `names`: read by a writer after its
        write, to tell readers which snapshots it leaves valid (workers.store.snapshots)."""
        tables = {name: self.table(name) for name in names}
        return {name: int(tbl.version) for name, tbl in tables.items() if tbl is not None}

    def warmers(self, namespace: str) -> list[Callable[[], None]]:
        """The namespace's snapshots and full-text indexes of the searched tables, read and
        built when missing, one call per table (the largest first): a request runs them at
        once beside its plan and its question's embedding, which then no longer wait in line
        with them (their reads and much of their index builds leave the GIL)."""
        return [partial(table.warm, namespace) for table in (self.nodes, self.records, self.turns)]

    def upsert_batches(
        self,
        batches: Sequence[RecordBatch],
        updates: Sequence[NodeUpdate],
        embedder: Embedder,
        sources: Sequence[Source | None] | None = None,
    ) -> dict[str, int]:
        """Write the records of `batches`, then their evidence `updates`.

        `sources[i]` is the lineage of `batches[i]` (workers.store.lineage). Records are
        written before nodes, and both before the batches' segments, so a reader never meets
        a node or a segment that links to a record not yet stored; a crash in between is
        repaired by redelivery, since every write is idempotent. Only rows whose content
        changes are written and only new texts are embedded, so a redelivered batch costs
        reads only (and one rewrite of its segment rows).
        """
        self.db.check_embedder(embedder)
        records = [r for b in batches for r in b.records]
        counts = {"records": 0, "records_written": 0, "nodes": 0, "nodes_written": 0}
        if records:
            counts = {
                "records": len({r.record_id for r in records}),
                "records_written": self.records.upsert(occurrences(batches, sources), embedder),
                "nodes": len(updates),
                "nodes_written": self.nodes.upsert(updates, embedder),
            }
        counts["segments_written"] = self.segments.upsert(batches, sources)
        return counts

    def count(self, name: str, namespace: str | None = None) -> int:
        return self.db.count(name, namespace)

    def count_by_type(self, namespace: str) -> dict[str, dict[str, int]]:
        """Rows of `namespace` per memory type and per node type."""
        return {
            RECORDS: value_counts(self.db, RECORDS, namespace, "memory_type"),
            NODES: value_counts(self.db, NODES, namespace, "node_type"),
        }

    def maybe_build_ann(self, min_rows: int, names: Sequence[str] = TABLES) -> list[str]:
        return self.db.maybe_build_ann(names, min_rows)

    def optimize(self, names: Sequence[str] | None = None) -> list[str]:
        return self.db.optimize(names)

    def latest(self) -> None:
        """Every table checked out at its latest version: after a read of a version a forget
        pruned (`read_pruned`), also where reads may lag (`read_consistency_s`)."""
        for name in ALL_TABLES:
            tbl = self.db.table(name)
            if tbl is not None:
                tbl.checkout_latest()

    def read(self, read: Callable[..., T], *args: Any) -> T:
        """`read(*args)`, again at every table's latest version when another process's forget
        pruned the version it was on (`read_pruned`): what a reader outside the query service
        (a listing, a history, the console's pages) reads through."""
        for attempt in range(PRUNED_READ_ATTEMPTS):
            try:
                return read(*args)
            except RuntimeError as exc:
                if not read_pruned(exc) or attempt == PRUNED_READ_ATTEMPTS - 1:
                    raise
                self.latest()
        raise AssertionError("unreachable")  # pragma: no cover

    def forget(
        self,
        namespace: str,
        session_id: str | None = None,
        embedder: Embedder | None = None,
        fence: Mapping[int, int] | None = None,
    ) -> Forgotten:
        """Remove a namespace, or one session of it, for good (workers.store.forget): what
        predates `fence` (None: all of it). The embedder re-embeds nodes that lose linked
        text (needed when some of the namespace stays)."""
        self.records.migrate()  # its rewrite indexes today's full-text column
        return forget(self, namespace, session_id, embedder, fence)

    def expire(self, cutoff: datetime, embedder: Embedder | None = None) -> Forgotten:
        """Remove turns and records dated before `cutoff` for good (retention)."""
        self.records.migrate()
        return expire(self, cutoff, embedder)
