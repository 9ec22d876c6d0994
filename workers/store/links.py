"""The `links` table: supersessions and conflicts between records (`schemas.supersession`).

A link is stored beside the two records it joins and never changes them: the older record
keeps its row, so a question about the past still finds it, and a reader learns from the
link that a later one replaces it (or contradicts it) and since when. The table holds no
vectors and no memory text; a store written before links existed simply has no table
until the first link is written, which is its whole migration. Links go with either of
their records (`drop_with`): a forget or retention that removes a record removes them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from schemas.supersession import LinkKind, Supersession
from workers.store.arrow import ID, naive
from workers.store.database import Database, Table
from workers.store.sql import ID_CHUNK, chunks, id_in, namespace_filter
from workers.store.writes import upsert_rows

LINKS = "links"


def links_schema() -> pa.Schema:
    return pa.schema(
        [
            ID,  # Supersession.link_id: one row per kind and pair
            ("namespace", pa.string()),
            ("kind", pa.string()),  # LinkKind
            ("older_id", pa.string()),
            ("newer_id", pa.string()),
            ("changed_at", pa.timestamp("us")),
            ("reason", pa.string()),
            ("found_by", pa.string()),  # rule:<name> or llm:<model>
        ]
    )


class LinksTable(Table):
    name = LINKS
    text_column = None  # nothing to search by text

    def __init__(self, db: Database) -> None:
        super().__init__(db, links_schema())

    def upsert(self, links: Sequence[Supersession]) -> int:
        """One merge_insert; a link found again (by a rule or a redelivered batch) keeps one
        row, the first finder's reason kept when the rows agree on the pair."""
        if not links:
            return 0
        rows = {link.link_id: _row(link) for link in links}
        tbl = self.table(create=True)
        assert tbl is not None
        known = self._ids(tbl, list(rows))
        fresh = [row for lid, row in rows.items() if lid not in known]
        if fresh:
            upsert_rows(tbl, pa.Table.from_pylist(fresh, schema=tbl.schema))
            self.db.ensure_indexes(LINKS, tbl, None)
        return len(fresh)

    def _ids(self, tbl: Any, ids: list[str]) -> set[str]:
        found: set[str] = set()
        for chunk in chunks(ids, ID_CHUNK):
            rows = tbl.search().where(id_in(chunk)).select(["id"]).limit(None).to_arrow()
            found.update(rows.column("id").to_pylist())
        return found

    def of_namespace(
        self, namespace: str, record_ids: Collection[str] | None = None
    ) -> list[Supersession]:
        """The namespace's links, those touching `record_ids` when given, oldest change first."""
        tbl = self.table()
        if tbl is None:
            return []
        data = tbl.search().where(namespace_filter(namespace)).limit(None).to_arrow()
        if record_ids is not None:
            ids = pa.array(sorted(set(record_ids)), pa.string())
            mask = pc.or_(
                pc.is_in(data.column("older_id"), value_set=ids),
                pc.is_in(data.column("newer_id"), value_set=ids),
            )
            data = data.filter(mask)
        return sorted((_link(r) for r in data.to_pylist()), key=link_order)


def link_order(link: Supersession) -> tuple[datetime, str]:
    """The order links are read in: oldest change first, then by id."""
    return (link.changed_at or datetime.min, link.link_id)


def drop_with(records: Collection[str], namespace: str | None = None) -> Any:
    """The mask of links touching any of `records` (of `namespace`, when given), for
    `Database.rewrite`."""
    values = pa.array(sorted(records), pa.string())

    def mask(d: pa.Table) -> Any:
        touching = pc.or_(
            pc.is_in(d.column("older_id"), value_set=values),
            pc.is_in(d.column("newer_id"), value_set=values),
        )
        return (
            touching
            if namespace is None
            else pc.and_(touching, pc.equal(d.column("namespace"), namespace))
        )

    return mask


def _row(link: Supersession) -> dict[str, Any]:
    return {
        "id": link.link_id,
        "namespace": link.namespace,
        "kind": link.kind.value,
        "older_id": link.older_id,
        "newer_id": link.newer_id,
        "changed_at": naive(link.changed_at),
        "reason": link.reason,
        "found_by": link.found_by,
    }


def _link(row: dict[str, Any]) -> Supersession:
    return Supersession(
        namespace=row["namespace"],
        kind=LinkKind(row["kind"]),
        older_id=row["older_id"],
        newer_id=row["newer_id"],
        changed_at=row["changed_at"],
        reason=row["reason"] or "",
        found_by=row["found_by"],
    )
