"""The stored records a segment's new records may update, found by subject in the store.

The LLM encoder shows them to the model (`<EARLIER_RECORDS>`), which says in its reply
which of them its new records supersede or contradict. They are found by the full-text
index of the records table over what the segment's turns say, at most `limit`, records of
the segment itself left out; the model is told never to take a record from them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

import structlog

from schemas import Segment
from workers.encoder.encoded import segment_turns
from workers.encoder.prompts import EarlierRecord
from workers.store import EvidenceStore

log = structlog.get_logger("lychee.encoder")

QUERY_CHARS = 1_000  # of the segment's text, searched for
_NOT_WORD = re.compile(r"[^\w\s]")


class StoreEarlier:
    """`EarlierRecords` over an evidence store (read only)."""

    def __init__(self, store: EvidenceStore) -> None:
        self.store = store

    def about(self, segment: Segment, limit: int) -> Sequence[EarlierRecord]:
        said = " ".join(text for _, _, text in segment_turns(segment))
        said = " ".join(_NOT_WORD.sub(" ", said).split())  # words only: no query syntax
        try:
            rows = self.store.records.search_text(segment.namespace, said[:QUERY_CHARS], limit * 2)
        except (ValueError, RuntimeError, OSError) as exc:
            # a hint, not a source: a store that cannot answer yet (a table being created,
            # its full-text index not built) shows none, and the segment is encoded anyway
            log.warning("encoder.earlier_unavailable", namespace=segment.namespace, error=str(exc))
            return []
        out = []
        for row in rows:
            if segment.segment_id in (row.get("segment_ids") or [row.get("segment_id")]):
                continue  # a redelivered segment's own records are not earlier
            created = row.get("created_at")
            day = created.date().isoformat() if isinstance(created, datetime) else ""
            out.append(EarlierRecord(row["id"], row["semantic_text"], day))
        return out[:limit]
