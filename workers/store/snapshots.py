"""Small namespaces held in memory for the query service's reads.

LanceDB spends milliseconds on any query, however few rows it reads (planning, the
namespace prefilter, turning rows into Python); an exact search over a namespace of a few
thousand rows in memory takes a fraction of a millisecond. A request runs about a dozen such
reads, so the query service keeps each small namespace's rows (the columns searches return,
and their vectors normalized) and answers its exact vector searches, full-text searches
(workers.store.fulltext), id lookups and turn spans from them.

A snapshot is valid for the table version it was read at. Each use compares it with the
table's latest version (one manifest check; once per table in a `consistent_reads` block,
a request, which reads each table's column names once too); any write to the table drops
every snapshot of it, so a write is seen by every request that starts after it and removed
text (a forget) is not kept in memory past the first read of that table by such a request.

A version is the whole table's, so without more a write to one namespace makes every other
namespace's snapshot read again, with its full-text indexes. A block that knows the version
of its namespace's last write (`consistent_reads(written=...)`, which the indexer records)
keeps a snapshot at that version or newer, whatever was written to the others since, and
asks LanceDB for no version at all. A forget is marked as a write to every namespace, so its
text still leaves memory at the table's first read after it. Snapshots are evicted least
recently used past `max_rows` rows in all.

A namespace read again builds its full-text indexes from those of the snapshot it replaces:
only rows whose text is new are analyzed (an agent's question after each exchange it writes
waits for that), and a term no row holds any more is dropped, so forgotten text leaves with
its rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from threadpoolctl import threadpool_limits

from workers.store.fulltext import TextIndex

# table -> the version the current `consistent_reads` block read first (worker threads
# started with asyncio.to_thread copy the context, and with it this same dict)
_PINNED: ContextVar[dict[str, int] | None] = ContextVar("lychee_pinned_versions", default=None)
# table -> its column names, read once in the block: a schema read is a call into LanceDB's
# event loop thread too, and a request reads the turns' columns about seven times
_NAMES: ContextVar[dict[str, frozenset[str]] | None] = ContextVar(
    "lychee_pinned_columns", default=None
)

# (table, namespace) -> the table version of the namespace's last write there, as its writer
# recorded it: a snapshot of the namespace at that version or newer holds every write to it;
# (table, EVERY) -> the version of the last write that reached every namespace (a forget,
# retention): no snapshot of the table older than it is kept, whichever namespace it holds
Written = Mapping[tuple[str, str], int]
EVERY = "*"  # no namespace: names are refused with glob characters
_WRITTEN: ContextVar[Written | None] = ContextVar("lychee_written_versions", default=None)

Match = Mapping[str, Collection[str]]  # column -> accepted values, beyond the namespace
Groups = dict[Any, tuple[np.ndarray, np.ndarray]]  # value -> (rows, their sort keys), sorted


@dataclass(frozen=True)
class Snapshot:
    """One namespace's rows of one table at one version."""

    version: int
    data: pa.Table  # the read columns, in table order
    unit: np.ndarray  # (rows, dim) float32, each row L2-normalized (0 without a direction)
    row_of: dict[str, int]  # id -> row
    _columns: dict[str, np.ndarray] = field(default_factory=dict, compare=False)
    _text: dict[str, TextIndex] = field(default_factory=dict, compare=False)
    _dicts: dict[int, dict[str, Any]] = field(default_factory=dict, compare=False)
    _groups: dict[tuple[str, str], Groups] = field(default_factory=dict, compare=False)
    _building: threading.Lock = field(default_factory=threading.Lock, compare=False)

    @classmethod
    def of(cls, version: int, data: pa.Table, previous: Snapshot | None = None) -> Snapshot:
        """`previous`: the namespace's snapshot at an earlier version; the indexes it built
        are built again now from its own (`TextIndex`'s `before`: only rows whose text is new
        are analyzed), and nothing of it is kept."""
        dim = data.schema.field("vector").type.list_size
        flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        vecs = np.asarray(flat, dtype=np.float32).reshape(-1, dim)
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        # a row without a direction (all zeros, or beyond float32) scores 0 against every
        # question instead of NaN, which would make each reply of its namespace unreadable
        usable = np.isfinite(norms) & (norms > 0)
        unit = np.divide(vecs, norms, out=np.zeros_like(vecs), where=usable)
        data = data.drop_columns(["vector"])
        ids = data.column("id").to_pylist()
        snap = cls(version, data, unit, {rid: i for i, rid in enumerate(ids)})
        if previous is not None:
            snap._carry_indexes(previous, ids)
        return snap

    def _carry_indexes(self, previous: Snapshot, ids: list[str]) -> None:
        """Build the full-text indexes `previous` built, from its own (`ids`: of each row)."""
        built = {c: i for c, i in list(previous._text.items()) if c in self.data.column_names}
        if not built:
            return
        at = np.asarray([previous.row_of.get(i, -1) for i in ids], dtype=np.int64)
        for column, index in built.items():
            texts = self.data.column(column)
            same = _same_text(texts, previous.data.column(column), at)
            self._text[column] = TextIndex(texts, (index, np.where(same, at, -1)))

    @property
    def rows(self) -> int:
        return int(self.data.num_rows)

    def mask(self, match: Match) -> np.ndarray:
        """Rows whose columns hold one of the accepted values."""
        keep = np.ones(self.rows, dtype=bool)
        for column, values in match.items():
            keep &= np.isin(self.column(column), list(values))
        return keep

    def column(self, name: str) -> np.ndarray:
        """A column as a numpy array, converted once."""
        if name not in self._columns:
            self._columns[name] = np.asarray(self.data.column(name).to_pylist(), dtype=object)
        return self._columns[name]

    def grouped(self, by: str, order: str) -> Groups:
        """Each value of the column `by` -> its rows sorted by the numeric column `order`, and
        those rows' `order` values (built once): ranges of one group found by bisection."""
        groups = self._groups.get((by, order))
        if groups is None:
            values, codes = np.unique(self.column(by), return_inverse=True)
            keys = np.asarray(self.data.column(order).to_numpy(zero_copy_only=False))
            rows = np.lexsort((keys, codes))
            bounds = np.searchsorted(codes[rows], np.arange(len(values) + 1))
            groups = self._groups[by, order] = {
                v: (rows[a:b], keys[rows[a:b]])
                for v, a, b in zip(values.tolist(), bounds[:-1], bounds[1:], strict=True)
            }
        return groups

    def search(self, vectors: np.ndarray, limit: int, match: Match) -> list[list[dict[str, Any]]]:
        """Exact cosine search, one list per query vector, nearest first, as LanceDB's
        exact search returns it (`_distance` = 1 - cosine similarity)."""
        q = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(q, axis=1, keepdims=True)
        sims = (q / np.where(norms > 0, norms, 1.0)) @ self.unit.T
        candidates = np.flatnonzero(self.mask(match)) if match else np.arange(self.rows)
        out = []
        for row in sims:
            top = candidates[_best(row[candidates], limit)]
            out.append(self._scored(top, "_distance", 1.0 - row[top]))
        return out

    def search_text(self, column: str, text: str, limit: int, match: Match) -> list[dict[str, Any]]:
        """BM25 search of `column` (built on first use), best first, ties in row order; rows
        with no query term are not returned, as in LanceDB."""
        scores = self.text_index(column).scores(text)
        if match:
            scores = np.where(self.mask(match), scores, 0.0)
        hits = np.flatnonzero(scores > 0)
        top = hits[_best(scores[hits], limit)]
        return self._scored(top, "_score", scores[top])

    def text_index(self, column: str) -> TextIndex:
        """The BM25 index of `column`, built once, by whoever asks first."""
        index = self._text.get(column)
        if index is None:
            with self._building:
                index = self._text.get(column)
                if index is None:
                    index = self._text[column] = TextIndex(self.data.column(column))
        return index

    def take(self, rows: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """Rows as dicts, each converted from Arrow once per snapshot (a request takes the
        same few hundred rows again and again; converting them is most of a search's cost).
        Each caller gets its own shallow copy."""
        rows = self._converted(rows)
        return [dict(self._dicts[r]) for r in rows]

    def _scored(self, rows: np.ndarray, key: str, scores: np.ndarray) -> list[dict[str, Any]]:
        """`take(rows)`, each copy with its score under `key` (the same floats as `float()`
        of each element gives)."""
        dicts = self._dicts
        at = self._converted(rows)
        return [{**dicts[r], key: v} for r, v in zip(at, scores.tolist(), strict=True)]

    def _converted(self, rows: Sequence[int] | np.ndarray) -> list[int]:
        """`rows` as ints, each converted from Arrow if it was not yet."""
        at: list[int] = np.asarray(rows, dtype=np.int64).tolist()
        new = list(dict.fromkeys(r for r in at if r not in self._dicts))
        if new:  # racing threads may both convert a row: the same values, either is kept
            converted = self.data.take(pa.array(new, pa.int64())).to_pylist()
            self._dicts.update(zip(new, converted, strict=True))
        return at

    def by_ids(self, ids: Sequence[str]) -> list[dict[str, Any]] | None:
        """Rows of `ids` in their order; None when one is not in the snapshot (it is newer
        than the snapshot, or of another namespace)."""
        rows = [self.row_of.get(i) for i in ids]
        if any(r is None for r in rows):
            return None
        return self.take([r for r in rows if r is not None])


def _same_text(texts: pa.ChunkedArray, before: pa.ChunkedArray, at: np.ndarray) -> np.ndarray:
    """Whether each row's text is the text row `at[i]` of `before` held (never for -1)."""
    if not len(before):
        return np.zeros(len(at), dtype=bool)
    now = pc.fill_null(texts.combine_chunks(), "")
    then = pc.fill_null(before.combine_chunks().take(pa.array(np.maximum(at, 0))), "")
    return np.asarray(pc.equal(now, then).to_numpy(zero_copy_only=False)) & (at >= 0)


def _best(scores: np.ndarray, limit: int) -> np.ndarray:
    """Positions of the `limit` highest scores, highest first, ties in position order: the
    first `limit` of a stable sort, with only the values at or above the limit-th sorted."""
    if 0 < limit < len(scores):
        cut = len(scores) - limit
        keep = np.flatnonzero(scores >= np.partition(scores, cut)[cut])
        return keep[np.argsort(-scores[keep], kind="stable")[:limit]]
    return np.argsort(-scores, kind="stable")[:limit]


@contextmanager
def consistent_reads(written: Written | None = None) -> Iterator[None]:
    """Snapshot reads in this block check each table's version once, at their first read of
    it, instead of at every read (a check is a call into LanceDB's event loop thread, and a
    request makes about a dozen reads). A write committed after that first read is seen by
    the next block, not necessarily by this one. `written`: where the block's namespaces were
    last written; a snapshot at least that new is used without a version check."""
    token, names = _PINNED.set({}), _NAMES.set({})
    marks = _WRITTEN.set(written)
    try:
        yield
    finally:
        _WRITTEN.reset(marks)
        _NAMES.reset(names)
        _PINNED.reset(token)


def column_names(tbl: Any, name: str) -> frozenset[str]:
    """The table's column names, read once per `consistent_reads` block (at every call
    outside one): a column a writer adds meanwhile is seen by the next block."""
    pinned = _NAMES.get()
    if pinned is None:
        return frozenset(tbl.schema.names)
    names = pinned.get(name)
    return names if names is not None else pinned.setdefault(name, frozenset(tbl.schema.names))


def _version(tbl: Any, name: str) -> int:
    pinned = _PINNED.get()
    if pinned is None:
        return int(tbl.version)
    version = pinned.get(name)
    # threads of one request reading the table at once: the first pin holds for all
    return version if version is not None else pinned.setdefault(name, int(tbl.version))


class SnapshotCache:
    """Snapshots by (table, namespace), least recently used evicted past `max_rows`."""

    def __init__(self, max_rows: int) -> None:
        # a process that keeps snapshots runs many small matrix products at once, in
        # threads, on few cores: BLAS threads of its own would only wait for each other
        threadpool_limits(1, user_api="blas")
        self.max_rows = max_rows
        self._entries: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._reading: dict[tuple[str, str], threading.Lock] = {}
        self._ahead: dict[tuple[str, str], int] = {}  # marks past the table's latest version
        self._swept: dict[str, int] = {}  # table -> the last EVERY mark its snapshots met

    def get(
        self,
        tbl: Any,
        name: str,
        namespace: str,
        columns: Callable[[], Sequence[str]],
        where: str,
    ) -> Snapshot:
        """The snapshot of `namespace` (rows matching `where`) at the table's latest version (in
        a `consistent_reads` block: the version its first read of the table found, or newer);
        `columns()` names what to read when it must be read again. One thread reads a
        namespace again at a time; the others wait for its snapshot."""
        key = (name, namespace)
        marks = _WRITTEN.get() or {}
        if (every := marks.get((name, EVERY))) is not None:
            self._sweep(name, every)
        with self._lock:
            previous = self._entries.get(key)  # read again, its indexes carry over
        floor = marks.get(key)
        if floor is not None and self._ahead.get(key) == floor:
            floor = None  # a mark this table never reached: its versions decide
        if floor is not None:
            valid = partial(self._written_since, key, floor)
        else:
            valid = partial(self._current, key, _version(tbl, name))
        snap = valid()
        if snap is not None:
            return snap
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            snap = valid()
            if snap is not None:
                return snap
            # labelled with the version read just before the rows, which are at least that new
            # (a write in between costs one more read, never a stale answer); a pinned
            # request's version may be older, and would make the next request read again
            latest = int(tbl.version)
            if floor is not None and latest < floor:  # a reader allowed to lag behind
                tbl.checkout_latest()
                latest = int(tbl.version)
                if latest < floor:  # the mark of a table since replaced (its Redis kept)
                    self._ahead[key] = floor
            data = tbl.search().where(where).select([*columns(), "vector"]).limit(None).to_arrow()
            snap = Snapshot.of(latest, data.combine_chunks(), previous)  # one chunk: faster `take`
            with self._lock:
                self._entries[key] = snap
                self._reading.pop(key, None)  # found in the entries from now on
                total = sum(s.rows for s in self._entries.values())
                while total > self.max_rows and len(self._entries) > 1:
                    _, old = self._entries.popitem(last=False)
                    total -= old.rows
        return snap

    def _sweep(self, name: str, every: int) -> None:
        """Drop the table's snapshots older than `every`, a write that reached every namespace:
        a forgotten namespace's text leaves memory at the table's first read after the forget,
        whichever namespace that read is for."""
        if self._swept.get(name, -1) >= every:
            return
        with self._lock:
            self._drop_older(name, every)
            self._swept[name] = every

    def _written_since(self, key: tuple[str, str], floor: int) -> Snapshot | None:
        """The snapshot of `key` if it holds the namespace's last write (at version `floor`);
        the other namespaces' snapshots stay, whatever their table's version."""
        with self._lock:
            return self._at_least(key, floor)

    def _current(self, key: tuple[str, str], version: int) -> Snapshot | None:
        """The snapshot of `key` at `version` or newer; drops the table's older ones."""
        with self._lock:
            snap = self._at_least(key, version)
            if snap is None:
                self._drop_older(key[0], version)
            return snap

    def _at_least(self, key: tuple[str, str], version: int) -> Snapshot | None:
        """The snapshot of `key` at `version` or newer, now the most recently used (the
        caller holds the lock)."""
        snap = self._entries.get(key)
        if snap is None or snap.version < version:
            return None
        self._entries.move_to_end(key)
        return snap

    def _drop_older(self, name: str, version: int) -> None:
        """Drop the table's snapshots older than `version` (the caller holds the lock)."""
        for old in [k for k, s in self._entries.items() if k[0] == name and s.version < version]:
            del self._entries[old]
