"""Rows as LanceDB stores them: the schema rules (primary key, plain strings), conversions
between rows, vectors and Arrow tables, and the rows a write still has to embed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from workers.embedding import Matrix
from workers.store import lineage
from workers.store.errors import EmbeddingMismatch

# `id` is declared the table's (unenforced) primary key. Without it Lance detects no
# conflict between two writers that both insert the same new id (each adds a fragment and
# touches none of the other's), so two indexer processes redelivered the same batch across
# a rebalance stored the row twice; with it the second commit is a retryable conflict and
# its retry finds the row (lance-format/lance#4585, #5633). A primary key must be non-null.
ID = pa.field(
    "id", pa.string(), nullable=False, metadata={"lance-schema:unenforced-primary-key": "true"}
)


def naive(d: datetime | None) -> datetime | None:
    """Conversation dates are stored as their wall-clock reading."""
    return d.replace(tzinfo=None) if d is not None and d.tzinfo is not None else d


def group_by_query(rows: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    """Split a multi-vector search's rows by their `query_index`, keeping rank order."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for row in rows:
        out[int(row.pop("query_index", 0)) if n > 1 else 0].append(row)
    for hits in out:
        hits.sort(key=lambda r: float(r["_distance"]))
    return out


PLAIN = {"lance-encoding:compression": "none", "lance-encoding:dict-values-compression": "none"}


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` as stored: `id` the primary key (`ID`, also for a table created before it
    was declared, when a forget rewrites it), every string (and list-of-string item) stored
    uncompressed.

    Lance compresses string pages (FSST, zstd) by default, and the dictionary of a column of
    few distinct values too, so a removed sentence could sit in a file without its bytes
    appearing there: a forget could not be verified by scanning the files. Plain pages cost
    about three times the text's compressed size, small beside the vectors (1.5 kB a row at
    384 dimensions); a dictionary stays a dictionary, its values plain.
    """

    def plain(f: pa.Field) -> pa.Field:
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            return f.with_metadata({**(f.metadata or {}), **PLAIN})
        if pa.types.is_list(f.type):
            return f.with_type(pa.list_(plain(f.type.value_field)))
        return f

    fields = [ID if f.name == "id" else f for f in schema]
    return pa.schema([plain(f) for f in fields], metadata=schema.metadata)


def read_columns(schema: pa.Schema) -> list[str]:
    """The columns a reader gets: not the vector, not the lineage (internal to forgets)."""
    return [n for n in schema.names if n not in ("vector", lineage.COLUMN)]


def to_arrow(
    rows: list[dict[str, Any]], vectors: Sequence[np.ndarray | None], schema: pa.Schema
) -> pa.Table:
    plain = pa.schema([f for f in schema if f.name != "vector"])
    data = pa.Table.from_pylist(rows, schema=plain)
    dim = schema.field("vector").type.list_size
    flat = np.concatenate([np.asarray(v, dtype=np.float32).reshape(dim) for v in vectors])
    column = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
    return data.append_column(schema.field("vector"), column).select(schema.names).cast(schema)


def rows_of(data: pa.Table) -> list[dict[str, Any]]:
    return list(data.drop_columns([c for c in ("vector",) if c in data.column_names]).to_pylist())


def vectors_of(data: pa.Table, dim: int) -> Iterator[np.ndarray]:
    if data.num_rows == 0:
        return iter(())
    flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return iter(np.asarray(flat, dtype=np.float32).reshape(-1, dim))


def check_matrix(matrix: Matrix, dim: int) -> Matrix:
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise EmbeddingMismatch(f"embedder returned shape {matrix.shape}; expected (n, {dim})")
    return matrix


@dataclass
class Pending:
    """Rows to write to one table, with the texts still to embed."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)
    to_embed: list[tuple[int, str]] = field(default_factory=list)  # (row index, text)

    def add(self, row: dict[str, Any], vector: np.ndarray | None, text: str) -> None:
        if vector is None:
            self.to_embed.append((len(self.rows), text))
        self.rows.append(row)
        self.vectors.append(vector)
