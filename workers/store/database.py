"""The LanceDB connection of one process and the rules every table follows (DESIGN §7).

Every table has a `namespace` column with a scalar index, and every read goes through
`namespace_filter`, applied as a prefilter. Writes are `merge_insert` on a deterministic
`id`, so a redelivered batch rewrites the same rows. The embedding model and dimension
are stored in each table's schema metadata; opening a table with another model is refused.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog
from lancedb.index import FTS, BTree, HnswSq

from workers.embedding import Embedder
from workers.embedding.model import switch_hint
from workers.store.arrow import (
    Pending,
    check_matrix,
    group_by_query,
    read_columns,
    rows_of,
    storage_schema,
    to_arrow,
    vectors_of,
)
from workers.store.errors import EmbeddingMismatch
from workers.store.snapshots import Match, Snapshot, SnapshotCache, column_names
from workers.store.sql import (
    ID_CHUNK,
    chunks,
    id_in,
    match_filter,
    matches_nothing,
    namespace_filter,
)
from workers.store.writes import is_commit_conflict, retry_conflicts, upsert_rows

log = structlog.get_logger("lychee.store")

T = TypeVar("T")

MODEL_KEY = "lychee.embedding_model"
DIM_KEY = "lychee.embedding_dim"
# A namespace up to this size is searched exactly even where an ANN index exists: among a
# thousand tenants the namespace prefilter leaves the index few candidates, so it is no
# faster and misses part of the exact top k (see
# docs/decisions.md#small-namespaces-are-searched-exactly-even-where-an-ann-index-exists).
EXACT_MAX_ROWS = 20_000
_SIZE_TTL_S = 30.0


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


# -- the connection ----------------------------------------------------------------------------


class Database:
    """One LanceDB connection per process: open tables cached, the embedding model checked,
    indexes created once; thread-safe for the reads the query service runs in threads."""

    def __init__(
        self,
        uri: str,
        embedding_model: str,
        dim: int,
        read_consistency_s: float = 0.0,
        exact_max_rows: int = EXACT_MAX_ROWS,
        storage_options: Mapping[str, str] | None = None,
        snapshot_rows: int = 0,
    ) -> None:
        self.uri = uri
        self.model = embedding_model
        self.dim = dim
        self.exact_max_rows = exact_max_rows
        self._sizes: dict[tuple[str, str], tuple[int, float]] = {}
        # Readers live in other processes than the writer: without a consistency interval
        # an open table would keep serving the version it was opened at.
        # storage_options: object-store settings of an s3:// (gs://, az://) URI, for example
        # the endpoint and keys of an S3-compatible store; ignored for a local directory.
        self.db = lancedb.connect(
            uri,
            read_consistency_interval=timedelta(seconds=read_consistency_s),
            storage_options=dict(storage_options) if storage_options else None,
        )
        self._tables: dict[str, Any] = {}
        # a reader's small namespaces in memory, up to this many rows (0: none)
        self.snapshots = SnapshotCache(snapshot_rows) if snapshot_rows > 0 else None
        self._indexed: set[str] = set()
        self._lock = threading.Lock()
        # tables some rows of which no search reads: table -> the boolean column that says
        # which are read (`TurnsTable`: a turn that is not memory); a table written before
        # the column existed is read whole
        self.searched: dict[str, str] = {}

    def table(self, name: str, create: bool = False, schema: pa.Schema | None = None) -> Any | None:
        """An open table (cached), created with `schema` when `create`; None when absent.
        A table of another embedding model is refused."""
        with self._lock:
            if name in self._tables:
                return self._tables[name]
            tbl = self._open(name) if has_table(self.db, name) else None
            if tbl is None and create:
                assert schema is not None, "creating a table needs its schema"
                tbl = self.db.create_table(name, schema=storage_schema(schema), exist_ok=True)
            if tbl is None:
                return None
            self._check_embedding(name, tbl.schema)
            self._tables[name] = tbl
            return tbl

    def _open(self, name: str) -> Any | None:
        """The table, or None while another process is still creating it: its directory is
        listed before its first version is committed, and opening it then fails."""
        try:
            return self.db.open_table(name)
        except (ValueError, FileNotFoundError):  # not cached: the next call opens it again
            return None

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
            hint = switch_hint(model) if model else None
            raise EmbeddingMismatch(
                f"table {name!r} at {self.uri} holds {model or 'unknown'} embeddings of "
                f"dimension {dim or width}; this process embeds with {self.model} ({self.dim}). "
                + (f"To read it, set {hint}; or " if hint else "Use the same model, or ")
                + "point LYCHEE_LANCEDB_URI at a new store and re-ingest."
            )

    def check_embedder(self, embedder: Embedder) -> None:
        if embedder.model_name != self.model or embedder.dim != self.dim:
            raise EmbeddingMismatch(
                f"embedder {embedder.model_name} ({embedder.dim}-d) does not match the store's "
                f"{self.model} ({self.dim}-d)"
            )

    def ensure_indexes(self, name: str, tbl: Any, text_column: str | None) -> None:
        """Namespace and id scalar indexes and the full-text index (if the table has a text
        column), once per table.

        Created after the first write: scalar and FTS indexes are trained on data."""
        if name in self._indexed:
            return
        wanted: list[tuple[str, Any]] = [("namespace", BTree()), ("id", BTree())]
        if text_column is not None:
            wanted.append((text_column, FTS(with_position=False)))

        def create_missing() -> None:
            # listed again on each try: a conflict may mean another process built one
            existing = {idx.name for idx in tbl.list_indices()}
            for column, config in wanted:
                if f"{column}_idx" not in existing:
                    tbl.create_index(column, config=config, replace=True)

        retry_conflicts(create_missing)
        self._indexed.add(name)

    def optimize(self, names: Sequence[str] | None = None) -> list[str]:
        """Compact fragments and fold new rows into the indexes: the open tables among `names`
        (default: every open table), one after the other. A compaction that loses its commit
        to a concurrent write is skipped (logged); the next call tries again. Returns the
        tables compacted."""
        done = []
        for name in list(self._tables) if names is None else names:
            tbl = self._tables.get(name)
            if tbl is None:
                continue
            started = time.perf_counter()
            try:
                tbl.optimize()
            except RuntimeError as exc:
                if not is_commit_conflict(exc):
                    raise
                log.info("store.optimize_preempted", table=name, error=str(exc)[:200])
                continue
            log.info(
                "store.optimized", table=name, ms=round((time.perf_counter() - started) * 1e3, 1)
            )
            done.append(name)
        return done

    def rewrite(
        self,
        name: str,
        text_column: str | None,
        drop: Callable[[pa.Table], pa.ChunkedArray | pa.Array],
        updated: Sequence[tuple[dict[str, Any], np.ndarray]] = (),
    ) -> tuple[int, int]:
        """Remove rows for good: the rows `drop` selects go, `updated` rows replace theirs.

        A LanceDB delete only marks rows deleted, and compaction rewrites a fragment only
        when enough of it is deleted (10 %), so removed text would stay in the data files.
        The table is therefore rewritten with the rows it keeps, its indexes rebuilt from
        them, and every older version pruned with its data, deletion and index files.
        Returns (rows removed, versions pruned). A read in another process of an older
        version fails (`workers.errors.read_pruned`): the query service searches again, the
        stages retry it as transient; forgets are rare.
        """
        tbl = self.table(name)
        if tbl is None:
            return 0, 0
        data = tbl.to_arrow()
        mask = drop(data)
        removed = int(pc.sum(mask).as_py() or 0)
        replace = {row["id"] for row, _ in updated}
        if replace:
            ids = pa.array(sorted(replace), pa.string())
            mask = pc.or_(mask, pc.is_in(data.column("id"), value_set=ids))
        if not removed and not replace:
            return 0, 0
        schema = storage_schema(tbl.schema)  # a table written by an older version too
        keep = data.filter(pc.invert(mask)).cast(schema)
        if updated:
            rows = [row for row, _ in updated]
            keep = pa.concat_tables([keep, to_arrow(rows, [v for _, v in updated], schema)])
        ann = has_ann(tbl)
        versions = len(tbl.list_versions())
        tbl.add(keep, mode="overwrite")
        with self._lock:
            self._indexed.discard(name)
        if keep.num_rows:
            self.ensure_indexes(name, tbl, text_column)
            if ann:
                partitions = max(1, keep.num_rows // 8192)
                tbl.create_index(
                    "vector", config=HnswSq(distance_type="cosine", num_partitions=partitions)
                )
        with warnings.catch_warnings():  # the warning is the point: old versions must go
            warnings.simplefilter("ignore", UserWarning)
            tbl.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
        pruned = versions + 1 - len(tbl.list_versions())
        self._sizes.clear()
        log.info(
            "store.rewritten",
            table=name,
            removed=removed,
            updated=len(replace),
            kept=keep.num_rows,
            versions_pruned=pruned,
        )
        return removed, max(0, pruned)

    def maybe_build_ann(self, names: Sequence[str], min_rows: int) -> list[str]:
        """Build a cosine HNSW-SQ index on each table with >= `min_rows` rows and none yet
        (a build that loses its commit is left to the next call).

        HNSW-SQ rather than IVF-PQ: no sub-vector/dimension constraint, no minimum row
        count for codebook training, and better recall at this scale. Rows added later
        are searched exactly until `optimize()` folds them into the index.
        """
        built = []
        for name in names:
            tbl = self.table(name)
            if tbl is None or "vector" not in tbl.schema.names or has_ann(tbl):
                continue
            rows = int(tbl.count_rows())
            if rows < min_rows:
                continue
            partitions = max(1, rows // 8192)
            try:
                tbl.create_index(
                    "vector", config=HnswSq(distance_type="cosine", num_partitions=partitions)
                )
            except RuntimeError as exc:  # another process built it, or wrote meanwhile
                if not is_commit_conflict(exc):
                    raise
                log.info("store.ann_preempted", table=name, error=str(exc)[:200])
                continue
            log.info("store.ann_built", table=name, rows=rows, partitions=partitions)
            built.append(name)
        return built

    def count(self, name: str, namespace: str | None = None) -> int:
        tbl = self.table(name)
        if tbl is None:
            return 0
        return int(tbl.count_rows(namespace_filter(namespace) if namespace else None))

    # -- reads and writes shared by the tables -------------------------------------------------

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

    def snapshot(
        self, tbl: Any, name: str, namespace: str, columns: Sequence[str] | None = None
    ) -> Snapshot | None:
        """The namespace's rows in memory (workers.store.snapshots), when this connection
        keeps snapshots and the namespace is small enough to be searched exactly; a
        snapshot read holds `columns` (default: the read columns)."""
        if self.snapshots is None or not self._small(tbl, name, namespace):
            return None
        wanted = (lambda: columns) if columns else (lambda: read_columns(tbl.schema))
        where = self.searched_rows(tbl, name, namespace_filter(namespace))
        return self.snapshots.get(tbl, name, namespace, wanted, where)

    def searched_rows(self, tbl: Any, name: str, where: str) -> str:
        """`where`, narrowed to the rows a search of table `name` reads (`searched`); a row
        whose flag is null (written by a worker that predates the column) is read."""
        column = self.searched.get(name)
        if column is None or column not in column_names(tbl, name):
            return where
        return f"{where} AND {column} IS NOT FALSE"

    def warm(
        self, name: str, namespace: str, column: str, columns: Sequence[str] | None = None
    ) -> None:
        """The namespace's snapshot of the table and its full-text index of `column`, read and
        built now when missing (the searches that follow, with the same `columns`, find them)."""
        tbl = self.table(name)
        snap = None if tbl is None else self.snapshot(tbl, name, namespace, columns)
        if snap is not None and column in snap.data.column_names:
            snap.text_index(column)

    def matching(
        self, name: str, namespace: str, match: Match, columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The namespace's rows whose columns hold one of the accepted values, in table order:
        from its snapshot, else read from LanceDB (`columns`, default the read columns)."""
        tbl = self.table(name)
        if tbl is None:
            return []
        snap = self.snapshot(tbl, name, namespace)
        if snap is not None:
            return snap.take(np.flatnonzero(snap.mask(match)))
        query = tbl.search().where(self.searched_rows(tbl, name, match_filter(namespace, match)))
        rows: list[dict[str, Any]] = (
            query.select(list(columns or read_columns(tbl.schema))).limit(None).to_list()
        )
        return rows

    def search_vectors(
        self,
        name: str,
        namespace: str,
        vectors: np.ndarray,
        limit: int,
        match: Match | None = None,
        columns: Sequence[str] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """One search for several query vectors (as fast as one): a result list per vector.
        `match`: accepted values of other columns; `columns`: those returned (default: the
        read columns)."""
        tbl = self.table(name)
        match = match or {}
        if tbl is None or limit <= 0 or len(vectors) == 0 or matches_nothing(match):
            return [[] for _ in range(len(vectors))]
        snap = self.snapshot(tbl, name, namespace, columns)
        if snap is not None:
            return snap.search(np.asarray(vectors), limit, match)
        cols = list(columns or read_columns(tbl.schema))
        query = [np.asarray(v, dtype=np.float32) for v in vectors]
        where = self.searched_rows(tbl, name, match_filter(namespace, match))
        q = self.vector_query(tbl, name, query if len(query) > 1 else query[0], where, namespace)
        rows = q.select([*cols, "_distance"]).limit(limit).to_list()
        return group_by_query(rows, len(vectors))

    def search_text(
        self,
        name: str,
        column: str,
        namespace: str,
        text: str,
        limit: int,
        match: Match | None = None,
        columns: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Full-text (BM25) search of `column`: from the namespace's snapshot when there is
        one (scored within the namespace, workers.store.fulltext), else by LanceDB's index."""
        tbl = self.table(name)
        match = match or {}
        if tbl is None or limit <= 0 or not text.strip() or matches_nothing(match):
            return []
        snap = self.snapshot(tbl, name, namespace, columns)
        if snap is not None and column in snap.data.column_names:
            return snap.search_text(column, text, limit, match)
        cols = list(columns or read_columns(tbl.schema))
        q = tbl.search(text, query_type="fts", fts_columns=column).where(
            self.searched_rows(tbl, name, match_filter(namespace, match)), prefilter=True
        )
        return list(q.select([*cols, "_score"]).limit(limit).to_list())

    def read_by_ids(
        self,
        tbl: Any,
        ids: Sequence[str],
        where: str | None = None,
        columns: Sequence[str] = (),
    ) -> dict[str, tuple[dict[str, Any], np.ndarray]]:
        """Stored rows (without `vector`) and their vectors, by id; only `id` and `columns`
        of each row when columns are named."""
        out: dict[str, tuple[dict[str, Any], np.ndarray]] = {}
        for chunk in chunks(list(dict.fromkeys(ids)), ID_CHUNK):
            clause = id_in(chunk) if where is None else f"({where}) AND {id_in(chunk)}"
            q = tbl.search().where(clause)
            if columns:
                q = q.select(list(dict.fromkeys(["id", *columns, "vector"])))
            data = q.limit(None).to_arrow()
            for row, vec in zip(rows_of(data), vectors_of(data, self.dim), strict=True):
                out[row["id"]] = (row, vec)
        return out

    def write(
        self, name: str, tbl: Any, pending: Pending, embedder: Embedder, text_column: str | None
    ) -> None:
        """Embed what `pending` still needs, then one merge_insert on `id`."""
        if not pending.rows:
            return
        vectors = list(pending.vectors)
        if pending.to_embed:
            matrix = check_matrix(embedder.embed([t for _, t in pending.to_embed]), self.dim)
            for (i, _), vec in zip(pending.to_embed, matrix, strict=True):
                vectors[i] = vec
        upsert_rows(tbl, to_arrow(pending.rows, vectors, tbl.schema))
        self.ensure_indexes(name, tbl, text_column)


class Table:
    """One table of the store: its name, schema and full-text column on the shared database."""

    name: str
    text_column: str | None

    def __init__(self, db: Database, schema: pa.Schema) -> None:
        self.db = db
        self.schema = schema

    def table(self, create: bool = False) -> Any | None:
        return self.db.table(self.name, create, self.schema)


class MergedTable(Table, Generic[T]):
    """A table whose rows absorb repeated input (read, merge, write only what changed)."""

    def _merge(self, tbl: Any, items: Sequence[T], embedder: Embedder) -> Pending:
        raise NotImplementedError

    def upsert(self, items: Sequence[T], embedder: Embedder) -> int:
        """Merge `items` into their rows; only changed rows are written and only changed
        texts embedded. Returns the number of rows written."""
        if not items:
            return 0
        tbl = self.table(create=True)
        pending = self._merge(tbl, items, embedder)
        self.db.write(self.name, tbl, pending, embedder, self.text_column)
        return len(pending.rows)


def has_ann(tbl: Any) -> bool:
    return any(i.columns == ["vector"] for i in tbl.list_indices())
