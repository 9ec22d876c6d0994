"""A chain of three values through the real indexer and query service: only the last is
called current, the middle one says it was replaced, and no item became current after it
was replaced (`valid_from` is the day it became current, not the date it speaks of)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from schemas import EvidenceItem, QueryReply, QueryRequest
from schemas.records import Temporal
from tests.workers.builders import HASH_DIM, HashEmbedder, statement
from workers.indexer.service import IndexBatch, IndexerService
from workers.query.serialize import item_line
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

pytestmark = pytest.mark.asyncio

SAID = [  # (session, said on, event date, text): one flight, rescheduled twice
    ("s1", datetime(2024, 1, 10), "2024-03-03", "The flight to Lisbon leaves on March 3."),
    ("s2", datetime(2024, 2, 1), "2024-04-09", "The flight to Lisbon now leaves on April 9."),
    ("s3", datetime(2024, 2, 20), "2024-04-20", "The flight to Lisbon now leaves on April 20."),
]


async def chained(tmp_path: Path) -> EvidenceStore:
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    batches = [
        statement("a", session, n, day, text, f"{session}t1", Temporal(t_ref=event))
        for n, (session, day, event, text) in enumerate(SAID)
    ]
    written = await IndexerService(store, HashEmbedder()).write(IndexBatch(records=batches))
    assert written["links_written"] == 2
    return store


async def chain_reply(tmp_path: Path) -> QueryReply:
    """The reply to a question about the chain's flight, over the chained store."""
    svc = QueryService(QueryDeps(await chained(tmp_path), HashEmbedder()))
    req = QueryRequest(
        correlation_id="c1",
        namespace="a",
        query="When does the flight to Lisbon leave?",
        k=6,
        reply_partition=0,
        deadline_ms=int(datetime(2100, 1, 1).timestamp() * 1000),
    )
    return await svc.search(req)


async def marked(tmp_path: Path) -> dict[str, EvidenceItem]:
    """The first evidence item of each statement, by its event's words."""
    reply = await chain_reply(tmp_path)
    found: dict[str, EvidenceItem] = {}
    for item in reply.evidence:
        for when in ("March 3", "April 9", "April 20"):
            if when in item.text and item.kind == "record":
                found.setdefault(when, item)
    assert set(found) == {"March 3", "April 9", "April 20"}, [e.text for e in reply.evidence]
    return found


async def test_the_middle_of_a_chain_is_replaced_not_current(tmp_path: Path) -> None:
    found = await marked(tmp_path)
    middle, last = found["April 9"], found["April 20"]
    assert middle.superseded_by and middle.supersedes
    line = item_line(middle)
    assert "[replaced on 20 February 2024 by a later statement]" in line
    assert "[it had replaced an earlier statement]" in line and "current" not in line
    assert "[current since 20 February 2024; replaces an earlier statement]" in item_line(last)


async def test_a_replaced_item_never_becomes_current_after_it_was_replaced(
    tmp_path: Path,
) -> None:
    found = await marked(tmp_path)
    first, middle = found["March 3"], found["April 9"]
    assert (first.valid_from, first.valid_to) == ("2024-01-10", "2024-02-01")
    assert (middle.valid_from, middle.valid_to) == ("2024-02-01", "2024-02-20")
    for item in found.values():
        assert item.valid_to is None or (item.valid_from or "") <= item.valid_to
