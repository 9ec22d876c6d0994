"""LanceDB tables of the evidence store (DESIGN §7).

Every table has a `namespace` column with a scalar index, and every read goes through
`namespace_filter`, applied as a prefilter. Writes are `merge_insert` on a deterministic
`id`, so a redelivered batch rewrites the same rows. The embedding model and dimension
are stored in the table's schema metadata; opening a table with another model is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import structlog
from lancedb.index import FTS, BTree

from schemas import RawTurn

log = structlog.get_logger("lychee.store")

TURNS = "turns"
MODEL_KEY = "lychee.embedding_model"
DIM_KEY = "lychee.embedding_dim"
# A namespace up to this size is searched exactly even where an ANN index exists: on the
# 1,000,000-record store, exact search over one 1,000-row namespace took 5.2 ms against
# 6.3 ms for the index, which also missed 12.5 % of the exact top 45 (`lychee bench latency`).
EXACT_MAX_ROWS = 20_000
_SIZE_TTL_S = 30.0


class StoreError(RuntimeError):
    """Base of the evidence store's errors."""


class EmbeddingMismatch(StoreError):
    """A table was built with another embedding model or dimension."""


def namespace_filter(namespace: str, session_id: str | None = None) -> str:
    # Names are validated by the contracts (letters, digits, . _ : @ + -); quoting is
    # still escaped so that a filter can never be widened by its input.
    clause = f"namespace = '{_sql(namespace)}'"
    if session_id:
        clause += f" AND session_id = '{_sql(session_id)}'"
    return clause


def _sql(value: str) -> str:
    return value.replace("'", "''")


def sql_quote(value: str) -> str:
    """A SQL string literal, quotes escaped."""
    return f"'{_sql(value)}'"


def has_table(db: Any, name: str) -> bool:
    # `table_names()` is deprecated and returns one page of names; `list_tables()` answers
    # in pages, and a page object does not support `in` (it iterates over its fields).
    token: str | None = None
    while True:
        page = db.list_tables(page_token=token)
        if name in page.tables:
            return True
        token = page.page_token
        if not token:
            return False


def turns_schema(dim: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.string()),
            ("namespace", pa.string()),
            ("session_id", pa.string()),
            ("turn_id", pa.string()),
            ("exchange_id", pa.string()),
            ("seq", pa.int64()),
            ("idx", pa.int32()),
            ("role", pa.string()),
            ("speaker", pa.string()),
            ("content", pa.string()),
            ("image_caption", pa.string()),
            ("text", pa.string()),
            ("session_date", pa.timestamp("us")),
            ("created_at", pa.timestamp("us", tz="UTC")),
            ("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={MODEL_KEY: model, DIM_KEY: str(dim)},
    )


def turn_row_id(namespace: str, session_id: str, turn_id: str) -> str:
    return f"{namespace}/{session_id}/{turn_id}"


class EvidenceStore:
    """One handle per process; thread-safe for the reads the query service runs in threads."""

    def __init__(
        self,
        uri: str,
        embedding_model: str,
        dim: int,
        read_consistency_s: float = 0.0,
        exact_max_rows: int = EXACT_MAX_ROWS,
    ) -> None:
        self.uri = uri
        self.exact_max_rows = exact_max_rows
        self._sizes: dict[tuple[str, str], tuple[int, float]] = {}
        self.model = embedding_model
        self.dim = dim
        # Readers live in other processes than the writer: without a consistency interval
        # an open table would keep serving the version it was opened at.
        self.db = lancedb.connect(
            uri, read_consistency_interval=timedelta(seconds=read_consistency_s)
        )
        self._tables: dict[str, Any] = {}
        self._indexed: set[str] = set()
        self._lock = threading.Lock()

    # -- tables -------------------------------------------------------------------------

    def table(self, name: str, create: bool = False, schema: pa.Schema | None = None) -> Any | None:
        """An open table (cached), created with `schema` (default: the turns schema) when
        `create`; None when absent. A table of another embedding model is refused."""
        with self._lock:
            if name in self._tables:
                return self._tables[name]
            if has_table(self.db, name):
                tbl = self.db.open_table(name)
            elif create:
                tbl = self.db.create_table(
                    name, schema=schema or turns_schema(self.dim, self.model), exist_ok=True
                )
            else:
                return None
            self._check_embedding(name, tbl.schema)
            self._tables[name] = tbl
            return tbl

    def _check_embedding(self, name: str, schema: pa.Schema) -> None:
        """Refuse a table whose vectors come from another model or dimension; the vector
        column's width is checked too, so a table written without the metadata cannot slip
        through."""
        meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
        model, dim = meta.get(MODEL_KEY), meta.get(DIM_KEY)
        vector = schema.field("vector").type if "vector" in schema.names else None
        width = getattr(vector, "list_size", None)
        if (model is not None and (model != self.model or dim != str(self.dim))) or (
            width is not None and width != self.dim
        ):
            raise EmbeddingMismatch(
                f"table {name!r} at {self.uri} holds {model or 'unknown'} embeddings of "
                f"dimension {dim or width}; this process embeds with {self.model} ({self.dim}). "
                "Use the same model, or point LYCHEE_LANCEDB_URI at a new store and re-ingest."
            )

    def ensure_indexes(self, name: str, tbl: Any, text_column: str) -> None:
        """Namespace and id scalar indexes and the full-text index, once per table.

        Created after the first write: scalar and FTS indexes are trained on data."""
        if name in self._indexed:
            return
        existing = {idx.name for idx in tbl.list_indices()}
        if "namespace_idx" not in existing:
            tbl.create_index("namespace", config=BTree(), replace=True)
        if "id_idx" not in existing:
            tbl.create_index("id", config=BTree(), replace=True)
        if f"{text_column}_idx" not in existing:
            tbl.create_index(text_column, config=FTS(with_position=False), replace=True)
        self._indexed.add(name)

    def optimize(self) -> None:
        """Compact fragments and fold new rows into the indexes, every open table."""
        for name in list(self._tables):
            started = time.perf_counter()
            self._tables[name].optimize()
            log.info(
                "store.optimized", table=name, ms=round((time.perf_counter() - started) * 1e3, 1)
            )

    # -- writes -------------------------------------------------------------------------

    def upsert_turns(self, turns: Sequence[RawTurn]) -> int:
        """One merge_insert for the batch; the last version of a repeated id wins."""
        if not turns:
            return 0
        for tr in turns:
            if tr.embedding_model != self.model or len(tr.embedding) != self.dim:
                raise EmbeddingMismatch(
                    f"turn {tr.turn_id} of {tr.namespace} carries {tr.embedding_model} "
                    f"({len(tr.embedding)}-d); the store holds {self.model} ({self.dim}-d)"
                )
        rows = {turn_row_id(t.namespace, t.session_id, t.turn_id): t for t in turns}
        tbl = self.table(TURNS, create=True)
        assert tbl is not None
        data = pa.Table.from_pylist(
            [_turn_row(rid, t) for rid, t in rows.items()], schema=tbl.schema
        )
        tbl.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
        self.ensure_indexes(TURNS, tbl, "text")
        return len(rows)

    # -- reads --------------------------------------------------------------------------

    def vector_query(self, tbl: Any, name: str, query: Any, where: str, namespace: str) -> Any:
        """A cosine vector query prefiltered by `where`; exact when the namespace is small.

        A highly selective prefilter leaves an ANN index few candidates in the partitions
        it probes, so small namespaces lose recall to it and gain no speed.
        """
        q = (
            tbl.search(query, vector_column_name="vector")
            .distance_type("cosine")
            .where(where, prefilter=True)
        )
        return q.bypass_vector_index() if self._small(tbl, name, namespace) else q

    def _small(self, tbl: Any, name: str, namespace: str) -> bool:
        now = time.monotonic()
        rows, expires = self._sizes.get((name, namespace), (0, 0.0))
        if expires < now:
            rows = int(tbl.count_rows(namespace_filter(namespace)))
            if len(self._sizes) > 10_000:
                self._sizes.clear()
            self._sizes[(name, namespace)] = (rows, now + _SIZE_TTL_S)
        return rows <= self.exact_max_rows

    def search_turns_vectors(
        self, namespace: str, vectors: np.ndarray, limit: int, session_id: str | None = None
    ) -> list[list[dict[str, Any]]]:
        """One search for several query vectors (as fast as one): a result list per vector."""
        tbl = self.table(TURNS)
        if tbl is None or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        where = namespace_filter(namespace, session_id)
        query = [np.asarray(v, dtype=np.float32) for v in vectors]
        q = self.vector_query(tbl, TURNS, query, where, namespace)
        return group_by_query(
            q.select([*_READ_COLUMNS, "_distance"]).limit(limit).to_list(), len(vectors)
        )

    def search_turns_text(
        self, namespace: str, text: str, limit: int, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        tbl = self.table(TURNS)
        if tbl is None or not text.strip():
            return []
        q = (
            tbl.search(text, query_type="fts", fts_columns="text")
            .where(namespace_filter(namespace, session_id), prefilter=True)
            .select([*_READ_COLUMNS, "_score"])
            .limit(limit)
        )
        return list(q.to_list())

    def turns_near(
        self, namespace: str, spans: Sequence[tuple[str, int, int]]
    ) -> list[dict[str, Any]]:
        """Turns of `namespace` in the given `(session_id, first_seq, last_seq)` spans."""
        tbl = self.table(TURNS)
        if tbl is None or not spans:
            return []
        ranges = " OR ".join(
            f"(session_id = '{_sql(s)}' AND seq >= {int(lo)} AND seq <= {int(hi)})"
            for s, lo, hi in spans
        )
        q = (
            tbl.search()
            .where(f"{namespace_filter(namespace)} AND ({ranges})", prefilter=True)
            .select(_READ_COLUMNS)
            .limit(None)
        )
        return list(q.to_list())

    def count(self, name: str, namespace: str | None = None) -> int:
        tbl = self.table(name)
        if tbl is None:
            return 0
        return int(tbl.count_rows(namespace_filter(namespace) if namespace else None))

    def turn_ids(self, namespace: str) -> set[str]:
        """Turn ids of a namespace as of the latest version, whoever wrote it."""
        tbl = self.table(TURNS)
        if tbl is None:
            return set()
        rows = (
            tbl.search()
            .where(namespace_filter(namespace))
            .select(["turn_id"])
            .limit(None)
            .to_list()
        )
        return {r["turn_id"] for r in rows}


_READ_COLUMNS = [
    "id", "namespace", "session_id", "turn_id", "exchange_id", "seq", "idx",
    "role", "speaker", "text", "session_date",
]  # fmt: skip


def _turn_row(rid: str, t: RawTurn) -> dict[str, Any]:
    return {
        "id": rid,
        "namespace": t.namespace,
        "session_id": t.session_id,
        "turn_id": t.turn_id,
        "exchange_id": t.exchange_id,
        "seq": t.seq,
        "idx": t.index,
        "role": t.role.value,
        "speaker": t.speaker,
        "content": t.text,
        "image_caption": t.image_caption,
        "text": t.rendered(),
        "session_date": naive(t.session_date),
        "created_at": t.created_at,
        "vector": t.embedding,
    }


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
