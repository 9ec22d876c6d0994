"""The `records` and `nodes` tables of the evidence store (DESIGN §7, paper §3.4).

They live next to `turns` in the `EvidenceStore`'s database and follow its rules: a
`namespace` column with a scalar index behind every read (as a prefilter), native
full-text indexes, the embedding model and dimension in the schema metadata, and
`merge_insert` on a deterministic `id`.

Writes are read-merge-write: a record id seen again keeps one row with its provenance
(evidence turns, segments) unioned, and a node folds new links into its stored row.
Both merges are idempotent, so a redelivered batch leaves the tables as they were. This
assumes one writer per table (the indexer stage); two concurrent writers could each
read a row before the other's write and drop the other's merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog
from lancedb.index import HnswSq

from schemas.records import MemoryRecord, NodeType, RecordBatch
from workers.embedding import Embedder, Matrix
from workers.indexer.nodes import NodeUpdate, combine_updates, derive_nodes, merge_node
from workers.indexer.store import (
    DIM_KEY,
    MODEL_KEY,
    TURNS,
    EmbeddingMismatch,
    EvidenceStore,
    group_by_query,
    naive,
    namespace_filter,
    sql_quote,
)

log = structlog.get_logger("lychee.records")

RECORDS = "records"
NODES = "nodes"

TEXT_COLUMN = {RECORDS: "normalized_text", NODES: "text", TURNS: "text"}
_ID_CHUNK = 500  # ids per `id IN (...)` filter: keeps the SQL text small


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


def nodes_schema(dim: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.string()),  # namespace/node_type/key
            ("namespace", pa.string()),
            ("node_type", pa.string()),
            ("key", pa.string()),
            ("label", pa.string()),
            ("text", pa.string()),  # label + linked texts, bounded: what is searched
            ("record_ids", pa.list_(pa.string())),  # oldest first, newest kept
            ("record_texts", pa.list_(pa.string())),  # aligned with record_ids
            ("session_id", pa.string()),
            ("first_turn_id", pa.string()),
            ("last_turn_id", pa.string()),
            ("updated_at", pa.timestamp("us")),  # latest conversation date linked
            ("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={MODEL_KEY: model, DIM_KEY: str(dim)},
    )


@dataclass
class _Pending:
    """Rows to write to one table, with the texts still to embed."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)
    to_embed: list[tuple[int, str]] = field(default_factory=list)  # (row index, text)

    def add(self, row: dict[str, Any], vector: np.ndarray | None, text: str) -> None:
        if vector is None:
            self.to_embed.append((len(self.rows), text))
        self.rows.append(row)
        self.vectors.append(vector)


class RecordsStore:
    """Records and evidence nodes on the `EvidenceStore`'s connection.

    One instance per process, like the `EvidenceStore`; reads are safe from threads.
    """

    def __init__(
        self,
        store: EvidenceStore,
        max_node_records: int = 64,
        max_node_text_chars: int = 2000,
    ) -> None:
        self.store = store
        self.model = store.model
        self.dim = store.dim
        self.max_node_records = max_node_records
        self.max_node_text_chars = max_node_text_chars
        self._schemas = {
            RECORDS: records_schema(self.dim, self.model),
            NODES: nodes_schema(self.dim, self.model),
        }

    # -- tables -------------------------------------------------------------------------

    def table(self, name: str, create: bool = False) -> Any | None:
        """`records`, `nodes` (or `turns`) on the store's connection; None if absent."""
        return self.store.table(name, create, self._schemas.get(name))

    # -- writes -------------------------------------------------------------------------

    def upsert_batch(self, batches: Sequence[RecordBatch], embedder: Embedder) -> dict[str, int]:
        """Write the records and evidence nodes of `batches`: one merge_insert per table.

        Records are written before nodes, so a reader never meets a node that links to a
        record not yet stored; a crash between the two is repaired by redelivery, since
        both writes are idempotent. Only rows whose content changes are written and only
        new texts are embedded, so a redelivered batch costs reads only.
        """
        if embedder.model_name != self.model or embedder.dim != self.dim:
            raise EmbeddingMismatch(
                f"embedder {embedder.model_name} ({embedder.dim}-d) does not match the store's "
                f"{self.model} ({self.dim}-d)"
            )
        # Derived first: a malformed batch raises before anything is written.
        updates = combine_updates([u for b in batches for u in derive_nodes(b)])
        records = [r for b in batches for r in b.records]
        if not records:
            return {"records": 0, "records_written": 0, "nodes": 0, "nodes_written": 0}

        rec_tbl = self.table(RECORDS, create=True)
        pending_records = self._merge_records(rec_tbl, records)
        self._write(RECORDS, rec_tbl, pending_records, embedder)

        node_tbl = self.table(NODES, create=True)
        pending_nodes = self._merge_nodes(node_tbl, updates)
        self._write(NODES, node_tbl, pending_nodes, embedder)
        return {
            "records": len({r.record_id for r in records}),
            "records_written": len(pending_records.rows),
            "nodes": len(updates),
            "nodes_written": len(pending_nodes.rows),
        }

    def _merge_records(self, tbl: Any, records: Sequence[MemoryRecord]) -> _Pending:
        seen: dict[str, list[MemoryRecord]] = {}
        for rec in records:
            seen.setdefault(rec.record_id, []).append(rec)
        existing = self._read_by_ids(tbl, list(seen))
        pending = _Pending()
        for rid, occurrences in seen.items():
            old, vector = existing.get(rid, (None, None))
            row = dict(old) if old else _record_row(occurrences[0])
            for rec in occurrences:
                row = _merge_record(row, rec)
            if row != old:
                pending.add(row, vector, row["normalized_text"])
        return pending

    def _merge_nodes(self, tbl: Any, updates: Sequence[NodeUpdate]) -> _Pending:
        existing = self._read_by_ids(tbl, [u.id for u in updates])
        pending = _Pending()
        for up in updates:
            old, vector = existing.get(up.id, (None, None))
            row = merge_node(old, up, self.max_node_records, self.max_node_text_chars)
            if row == old:
                continue
            # Same embedded text, same embedding: only links or provenance changed.
            embedded = _node_embedding_text(row)
            keep = vector if old is not None and _node_embedding_text(old) == embedded else None
            pending.add(row, keep, embedded)
        return pending

    def _write(self, name: str, tbl: Any, pending: _Pending, embedder: Embedder) -> None:
        if not pending.rows:
            return
        vectors = list(pending.vectors)
        if pending.to_embed:
            matrix = _check_matrix(embedder.embed([t for _, t in pending.to_embed]), self.dim)
            for (i, _), vec in zip(pending.to_embed, matrix, strict=True):
                vectors[i] = vec
        data = _to_arrow(pending.rows, vectors, tbl.schema)
        tbl.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
        self.store.ensure_indexes(name, tbl, TEXT_COLUMN[name])

    def _read_by_ids(
        self, tbl: Any, ids: Sequence[str], where: str | None = None
    ) -> dict[str, tuple[dict[str, Any], np.ndarray]]:
        """Stored rows (without `vector`) and their vectors, by id."""
        out: dict[str, tuple[dict[str, Any], np.ndarray]] = {}
        for chunk in _chunks(list(dict.fromkeys(ids)), _ID_CHUNK):
            clause = _id_in(chunk) if where is None else f"({where}) AND {_id_in(chunk)}"
            data = tbl.search().where(clause).limit(None).to_arrow()
            for row, vec in zip(_rows(data), _vectors(data, self.dim), strict=True):
                out[row["id"]] = (row, vec)
        return out

    def maybe_build_ann(self, min_rows: int) -> list[str]:
        """Build a cosine HNSW-SQ index on each table with >= `min_rows` rows and none yet.

        HNSW-SQ rather than IVF-PQ: no sub-vector/dimension constraint, no minimum row
        count for codebook training, and better recall at this scale. Rows added later
        are searched exactly until `optimize()` folds them into the index.
        """
        built = []
        for name in (RECORDS, NODES, TURNS):
            tbl = self.table(name)
            if tbl is None or any(i.columns == ["vector"] for i in tbl.list_indices()):
                continue
            rows = int(tbl.count_rows())
            if rows < min_rows:
                continue
            partitions = max(1, rows // 8192)
            tbl.create_index(
                "vector", config=HnswSq(distance_type="cosine", num_partitions=partitions)
            )
            log.info("store.ann_built", table=name, rows=rows, partitions=partitions)
            built.append(name)
        return built

    # -- reads --------------------------------------------------------------------------

    def search_records_vector(
        self, namespace: str, vec: np.ndarray, limit: int
    ) -> list[dict[str, Any]]:
        return self._search_vector(RECORDS, namespace_filter(namespace), vec, limit, namespace)

    def search_records_text(self, namespace: str, text: str, limit: int) -> list[dict[str, Any]]:
        return self._search_text(RECORDS, namespace_filter(namespace), text, limit)

    def search_records_vectors(
        self, namespace: str, vectors: np.ndarray, limit: int
    ) -> list[list[dict[str, Any]]]:
        return self._search_vectors(RECORDS, namespace_filter(namespace), vectors, limit, namespace)

    def search_nodes_vectors(
        self,
        namespace: str,
        vectors: np.ndarray,
        limit: int,
        node_types: Iterable[NodeType | str] | None = None,
    ) -> list[list[dict[str, Any]]]:
        where = _node_filter(namespace, node_types)
        return self._search_vectors(NODES, where, vectors, limit, namespace)

    def search_nodes_vector(
        self,
        namespace: str,
        vec: np.ndarray,
        limit: int,
        node_types: Iterable[NodeType | str] | None = None,
    ) -> list[dict[str, Any]]:
        where = _node_filter(namespace, node_types)
        return self._search_vector(NODES, where, vec, limit, namespace)

    def search_nodes_text(
        self,
        namespace: str,
        text: str,
        limit: int,
        node_types: Iterable[NodeType | str] | None = None,
    ) -> list[dict[str, Any]]:
        return self._search_text(NODES, _node_filter(namespace, node_types), text, limit)

    def temporal_nodes(self, namespace: str) -> list[dict[str, Any]]:
        """Every temporal node of a namespace (a few per month of conversation), by key."""
        tbl = self.table(NODES)
        if tbl is None:
            return []
        where = _node_filter(namespace, [NodeType.temporal])
        rows = tbl.search().where(where).select(["id", "key", "record_ids"]).limit(None).to_list()
        return sorted(rows, key=lambda r: str(r["key"]))

    def records_by_ids(self, namespace: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Records of `namespace` among `ids`, in the order of `ids` (missing ones skipped)."""
        tbl = self.table(RECORDS)
        if tbl is None or not ids:
            return []
        found = self._read_by_ids(tbl, ids, where=namespace_filter(namespace))
        return [found[i][0] for i in dict.fromkeys(ids) if i in found]

    def count(self, table: str, namespace: str | None = None) -> int:
        tbl = self.table(table)
        if tbl is None:
            return 0
        return int(tbl.count_rows(namespace_filter(namespace) if namespace else None))

    def count_by_type(self, namespace: str) -> dict[str, dict[str, int]]:
        """Rows of `namespace` per memory type and per node type."""
        return {
            RECORDS: self._value_counts(RECORDS, namespace, "memory_type"),
            NODES: self._value_counts(NODES, namespace, "node_type"),
        }

    def _value_counts(self, name: str, namespace: str, column: str) -> dict[str, int]:
        tbl = self.table(name)
        if tbl is None:
            return {}
        data = (
            tbl.search().where(namespace_filter(namespace)).select([column]).limit(None).to_arrow()
        )
        counts = pc.value_counts(data.column(column)).to_pylist()
        return {c["values"]: int(c["counts"]) for c in sorted(counts, key=lambda c: c["values"])}

    def _search_vector(
        self, name: str, where: str, vec: np.ndarray, limit: int, namespace: str
    ) -> list[dict[str, Any]]:
        return self._search_vectors(name, where, np.asarray([vec]), limit, namespace)[0]

    def _search_vectors(
        self, name: str, where: str, vectors: np.ndarray, limit: int, namespace: str
    ) -> list[list[dict[str, Any]]]:
        """One search for several query vectors: a result list per vector."""
        tbl = self.table(name)
        if tbl is None or limit <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        query = [np.asarray(v, dtype=np.float32) for v in vectors]
        q = self.store.vector_query(
            tbl, name, query if len(query) > 1 else query[0], where, namespace
        )
        rows = q.select([*_read_columns(tbl.schema), "_distance"]).limit(limit).to_list()
        return group_by_query(rows, len(vectors))

    def _search_text(self, name: str, where: str, text: str, limit: int) -> list[dict[str, Any]]:
        tbl = self.table(name)
        if tbl is None or limit <= 0 or not text.strip():
            return []
        q = (
            tbl.search(text, query_type="fts", fts_columns=TEXT_COLUMN[name])
            .where(where, prefilter=True)
            .select([*_read_columns(tbl.schema), "_score"])
            .limit(limit)
        )
        return list(q.to_list())


# -- rows ---------------------------------------------------------------------------------


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


def _to_arrow(
    rows: list[dict[str, Any]], vectors: Sequence[np.ndarray | None], schema: pa.Schema
) -> pa.Table:
    plain = pa.schema([f for f in schema if f.name != "vector"])
    data = pa.Table.from_pylist(rows, schema=plain)
    dim = schema.field("vector").type.list_size
    flat = np.concatenate([np.asarray(v, dtype=np.float32).reshape(dim) for v in vectors])
    column = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
    return data.append_column(schema.field("vector"), column).cast(schema)


def _rows(data: pa.Table) -> list[dict[str, Any]]:
    return list(data.drop_columns([c for c in ("vector",) if c in data.column_names]).to_pylist())


def _vectors(data: pa.Table, dim: int) -> Iterator[np.ndarray]:
    if data.num_rows == 0:
        return iter(())
    flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return iter(np.asarray(flat, dtype=np.float32).reshape(-1, dim))


def _check_matrix(matrix: Matrix, dim: int) -> Matrix:
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise EmbeddingMismatch(f"embedder returned shape {matrix.shape}; expected (n, {dim})")
    return matrix


def _read_columns(schema: pa.Schema) -> list[str]:
    return [n for n in schema.names if n != "vector"]


def _node_filter(namespace: str, node_types: Iterable[NodeType | str] | None) -> str:
    clause = namespace_filter(namespace)
    if node_types is not None:
        # An empty selection matches nothing (`IN ()` is not valid SQL).
        types = sorted({NodeType(t).value for t in node_types})
        clause += (
            f" AND node_type IN ({', '.join(sql_quote(t) for t in types)})"
            if types
            else " AND false"
        )
    return clause


def _id_in(ids: Sequence[str]) -> str:
    return f"id IN ({', '.join(sql_quote(i) for i in ids)})"


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


NODE_EMBED_CHARS = 480


def _node_embedding_text(row: dict[str, Any]) -> str:
    """What a node's vector is computed from.

    Temporal nodes are found by key, so their vector comes from the label alone. Other
    nodes embed their label and their OLDEST linked texts up to `NODE_EMBED_CHARS`: the
    head stops changing once it is full, so a busy node is not re-embedded every time it
    gains a link (MiniLM reads only 256 tokens anyway); the full merged text stays in the
    full-text index.
    """
    if row["node_type"] == NodeType.temporal.value:
        return str(row["label"])
    return "\n".join([str(row["label"]), *map(str, row.get("record_texts") or [])])[
        :NODE_EMBED_CHARS
    ]
