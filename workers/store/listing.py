"""Listing what is remembered about a namespace: records and raw turns, a page at a time.

Read straight from the tables (no vectors), filtered and ordered in Arrow: a person asks
what is kept about them, rarely, and one namespace's rows without vectors are small.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from workers.store.arrow import read_columns
from workers.store.database import Database
from workers.store.records import RECORDS
from workers.store.sql import namespace_filter
from workers.store.turns import MEMORY_COLUMN, TURNS

MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    total: int
    page: int
    page_size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


def _check_page(page: int, page_size: int) -> None:
    if page < 1:
        raise ValueError(f"page must be 1 or more (got {page})")
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(f"page_size must be 1 to {MAX_PAGE_SIZE} (got {page_size})")


def _read(
    db: Database,
    name: str,
    namespace: str,
    session_id: str | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """The namespace's (or session's) rows of table `name`: `columns`, or all but vectors."""
    tbl = db.table(name)
    if tbl is None:
        return pa.table({})
    return (
        tbl.search()
        .where(namespace_filter(namespace, session_id), prefilter=True)
        .select(columns or read_columns(tbl.schema))
        .limit(None)
        .to_arrow()
    )


def _page(data: pa.Table, page: int, page_size: int) -> Page:
    start = (page - 1) * page_size
    items = data.slice(start, page_size).to_pylist() if start < data.num_rows else []
    return Page(items, data.num_rows, page, page_size)


def list_records(
    db: Database,
    namespace: str,
    session_id: str | None = None,
    memory_type: str | None = None,
    since: date | None = None,
    page: int = 1,
    page_size: int = 50,
) -> Page:
    """Records of a namespace, oldest first (`_conversation_order`). `session_id`
    keeps records any of whose segments belong to that session."""
    _check_page(page, page_size)
    data = _read(db, RECORDS, namespace)
    if not data.num_rows:
        return Page([], 0, page, page_size)
    if memory_type is not None:
        data = data.filter(pc.equal(data.column("memory_type"), memory_type))
    if since is not None:
        start = pa.scalar(datetime.combine(since, datetime.min.time()), pa.timestamp("us"))
        data = data.filter(pc.greater_equal(data.column("created_at"), start))
    if session_id is not None:
        prefix = f"{namespace}/{session_id}/"
        keep = [
            src == session_id or any(s.startswith(prefix) for s in segs or [])
            for src, segs in zip(
                data.column("source_session").to_pylist(),
                data.column("segment_ids").to_pylist(),
                strict=True,
            )
        ]
        data = data.filter(pa.array(keep, pa.bool_()))
    order = pa.array(_conversation_order(db, namespace, data), pa.int64())
    return _page(data.take(order), page, page_size)


def _conversation_order(db: Database, namespace: str, records: pa.Table) -> list[int]:
    """Row numbers of `records` by conversation date, session, the place of the record's
    first source turn in its session, then id: in the order things were said (a date holds
    many records, and their ids are digests)."""
    turns = _read(db, TURNS, namespace, columns=["session_id", "turn_id", "seq"]).to_pydict()
    pairs = zip(turns.get("session_id", []), turns.get("turn_id", []), strict=True)
    seqs: dict[tuple[str, str], int] = dict(zip(pairs, turns.get("seq", []), strict=True))
    columns = records.select(["created_at", "source_session", "evidence", "id"]).to_pydict()
    last = float("inf")  # a record whose turns are not stored (forgotten) after the rest

    def key(i: int) -> tuple[Any, ...]:
        session, evidence = columns["source_session"][i] or "", columns["evidence"][i] or []
        seq = seqs.get((session, evidence[0]), last) if evidence else last
        return (
            columns["created_at"][i] is None,
            columns["created_at"][i] or datetime.min,
            session,
            seq,
            columns["id"][i],
        )

    return sorted(range(records.num_rows), key=key)


def list_turns(
    db: Database, namespace: str, session_id: str | None = None, page: int = 1, page_size: int = 50
) -> Page:
    """Raw turns of a namespace (or one session), in conversation order."""
    _check_page(page, page_size)
    data = _read(db, TURNS, namespace, session_id)
    if not data.num_rows:
        return Page([], 0, page, page_size)
    data = data.sort_by([("session_id", "ascending"), ("seq", "ascending"), ("idx", "ascending")])
    if MEMORY_COLUMN in data.column_names:  # a row without the flag (an earlier writer) is memory
        at = data.column_names.index(MEMORY_COLUMN)
        data = data.set_column(at, MEMORY_COLUMN, pc.fill_null(data[MEMORY_COLUMN], True))
    return _page(data, page, page_size)
