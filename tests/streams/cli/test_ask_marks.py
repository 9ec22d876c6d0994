"""`lychee ask`'s text output carries the marks its `--json` has: a chain of three values
through the real indexer and query service, printed as a person reads it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from schemas import QueryRequest
from streams.cli.data import format_evidence
from tests.workers.builders import HashEmbedder
from tests.workers.query.test_currency_chain import chained
from workers.query.service import QueryDeps, QueryService

pytestmark = pytest.mark.asyncio


async def test_ask_text_marks_what_replaced_what_per_item(tmp_path: Path) -> None:
    svc = QueryService(QueryDeps(await chained(tmp_path), HashEmbedder()))
    req = QueryRequest(
        correlation_id="c1",
        namespace="a",
        query="When does the flight to Lisbon leave?",
        k=6,
        reply_partition=0,
        deadline_ms=int(datetime(2100, 1, 1).timestamp() * 1000),
    )
    reply = await svc.search(req)
    ids = {e.text: e.item_id.rsplit("/", 1)[-1][:8] for e in reply.evidence if e.kind == "record"}
    first, middle, last = (
        ids[f"The flight to Lisbon {w}"]
        for w in ("leaves on March 3.", "now leaves on April 9.", "now leaves on April 20.")
    )
    lines = format_evidence(reply).splitlines()

    def marks_of(text: str) -> str:
        at = next(i for i, x in enumerate(lines) if x.split("] ", 1)[-1].startswith(text))
        return lines[at + 1].strip()

    assert (
        marks_of("The flight to Lisbon leaves on March 3.") == f"[replaced 2024-02-01 by {middle}]"
    )
    assert marks_of("The flight to Lisbon now leaves on April 9.") == (
        f"[replaced 2024-02-20 by {last}; had replaced {first}]"
    )
    assert marks_of("The flight to Lisbon now leaves on April 20.") == (
        f"[current since 2024-02-20, replaced {middle}]"
    )
