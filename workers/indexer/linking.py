"""Supersession links written with the records: the encoder's own, then the offline rules'.

Run by the indexer after a batch's records are stored (under the records writer's lock,
so one writer per namespace): the rules read the namespace's records back with where each
was said, and keep the links that touch a record of the batch. A redelivered batch finds
the same links, which the links table stores once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.records import RecordBatch
from schemas.supersession import Supersession
from workers.indexer.supersession import Statement, link_statements
from workers.store import EvidenceStore
from workers.store.records import statements

MAX_STATEMENTS = 20_000  # the latest records of a namespace the rules compare


def links_of(store: EvidenceStore, batches: Sequence[RecordBatch]) -> list[Supersession]:
    """The batches' own links (found by the encoder), then the rules' that touch their records."""
    found = [link for b in batches for link in b.supersessions]
    for namespace in dict.fromkeys(b.namespace for b in batches):
        new = {r.record_id for b in batches if b.namespace == namespace for r in b.records}
        if not new:
            continue
        said = _statements(store, namespace)
        found += [
            link
            for link in link_statements(namespace, said)
            if link.older_id in new or link.newer_id in new
        ]
    return found


def _statements(store: EvidenceStore, namespace: str) -> list[Statement]:
    rows = statements(store.db, namespace, MAX_STATEMENTS)
    firsts = {(r["source_session"], (r["evidence"] or [""])[0]) for r in rows}
    seqs = store.turns.seqs(namespace, firsts)
    return [_statement(r, seqs) for r in rows]


def _statement(row: dict[str, Any], seqs: dict[tuple[str, str], int]) -> Statement:
    session = row["source_session"] or ""
    first = (row["evidence"] or [""])[0]
    return Statement(
        record_id=row["id"],
        text=row["semantic_text"] or "",
        role=row["source_role"] or "",
        session_id=session,
        said_at=row["created_at"],
        position=(_segment_index(row["segment_id"] or ""), seqs.get((session, first), -1)),
    )


def _segment_index(segment_id: str) -> int:
    """`namespace/session/n` -> n (-1 when the id has another form)."""
    tail = segment_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else -1
