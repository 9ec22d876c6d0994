"""The write rules of every table: one `merge_insert` on the primary key, commit conflicts
retried, and ids that two racing writers stored twice repaired."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from workers.store.errors import CommitConflict
from workers.store.sql import ID_CHUNK, chunks, id_in

log = structlog.get_logger("lychee.store")

_REPAIR_ROUNDS = 5  # rounds of re-writing ids stored twice (see `upsert_rows`)
_CONFLICT_RETRIES = 6


def is_commit_conflict(exc: BaseException) -> bool:
    # lance raises a bare RuntimeError("lance error: Retryable commit conflict for version ...")
    return isinstance(exc, RuntimeError) and "commit conflict" in str(exc).lower()


def overtaken(exc: BaseException) -> bool:
    """Whether maintenance lost its table to a write: a conflict its retries did not win, or
    an index build a forget's rewrite overtook ("CreateIndex transaction is incompatible
    with concurrent transaction Overwrite"). The next maintenance tick does it again."""
    return isinstance(exc, CommitConflict) or (
        isinstance(exc, RuntimeError)
        and "incompatible with concurrent transaction" in str(exc).lower()
    )


def retry_conflicts(action: Callable[[], None]) -> None:
    """Run `action`, again (with backoff) each time it loses a commit race.

    LanceDB commits optimistically: a write concurrent with a compaction, an index build or
    another process's write of the same table may be refused as a retryable conflict (or the
    other one is: which loses depends on the operations). A refused commit changed nothing,
    so running the action again is safe; `optimize()` therefore needs no writer's lock.
    After the last retry the conflict is raised as transient (the stage retries the batch).
    """
    for attempt in range(_CONFLICT_RETRIES):
        try:
            action()
            return
        except RuntimeError as exc:
            if not is_commit_conflict(exc):
                raise
            if attempt == _CONFLICT_RETRIES - 1:
                raise CommitConflict(f"{exc}".splitlines()[0][:300], retry_after_s=1.0) from exc
            time.sleep(0.05 * 2**attempt)


def upsert_rows(tbl: Any, data: pa.Table) -> None:
    """One merge_insert on `id` (the primary key, see `ID`), retried on commit conflicts.

    Then the written ids are read back: when two writers insert one new id at once, Lance
    does not always see the conflict even with the key declared (lance-format/lance#9238),
    and the id is stored twice. Such an id is deleted and written again once, until no
    written id is stored twice (a few rounds at most: the other writer repairs it too)."""

    def merge(rows: pa.Table) -> None:
        retry_conflicts(
            lambda: (
                tbl.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows)
            )
        )

    merge(data)
    ids = list(dict.fromkeys(data.column("id").to_pylist()))
    for _ in range(_REPAIR_ROUNDS):
        twice = _stored_twice(tbl, ids)
        if not twice:
            return
        log.warning("store.duplicate_ids_repaired", table=tbl.name, ids=twice[:10], n=len(twice))
        retry_conflicts(functools.partial(tbl.delete, id_in(twice)))
        merge(data.filter(pc.is_in(data.column("id"), value_set=pa.array(twice))))


def _stored_twice(tbl: Any, ids: list[str]) -> list[str]:
    seen: Counter[str] = Counter()
    for chunk in chunks(ids, ID_CHUNK):
        found = tbl.search().where(id_in(chunk)).select(["id"]).limit(None).to_arrow()
        seen.update(found.column("id").to_pylist())
    return sorted(rid for rid, n in seen.items() if n > 1)


# -- SQL --------------------------------------------------------------------------------------
