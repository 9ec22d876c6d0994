"""A namespace's history from the links the indexer's rules wrote, on a real LanceDB, and
how `lychee records NS --history` prints it."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from schemas.supersession import LinkKind
from streams.cli.data import print_history
from tests.workers.builders import HASH_DIM, HashEmbedder, statement
from tests.workers.query.test_currency import SAID, indexed
from workers.indexer.service import IndexBatch, IndexerService
from workers.store import EvidenceStore
from workers.store.history import history

pytestmark = pytest.mark.asyncio


async def test_history_tells_what_replaced_what_and_the_open_conflicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = await indexed(tmp_path)
    found = history(store.records, store.links, store.segments, "a")
    (change,) = found.supersessions
    assert (change.older.text, change.newer.text) == (SAID[0][3], SAID[2][3])
    assert change.older.turn_ids == ["s1t1"] and change.newer.session_id == "s2"
    assert change.changed_at is not None and change.changed_at.date().isoformat() == "2024-04-02"
    assert change.found_by == "rule:value-change" and "900 watts then 650 watts" in change.reason
    (conflict,) = found.conflicts
    assert conflict.kind is LinkKind.conflict
    assert {conflict.older.text, conflict.newer.text} == {SAID[1][3], SAID[3][3]}

    one = history(store.records, store.links, store.segments, "a", change.newer.record_id)
    assert one.supersessions == [change] and one.conflicts == []
    assert history(store.records, store.links, store.segments, "b").supersessions == []

    print_history(found, as_json=False)
    out = capsys.readouterr().out
    assert "replaced on 2024-04-02 (rule:value-change" in out
    assert f"  was  [2024-03-01] {SAID[0][3]}" in out and "1 supersessions, 1 open conflicts" in out
    print_history(found, as_json=True)
    data = json.loads(capsys.readouterr().out)
    assert data["supersessions"][0]["newer"]["turn_ids"] == ["s2t1"]


async def test_a_value_said_again_after_it_was_replaced_is_a_change_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The links table keeps what the rules found (900 then 650); the history adds the change
    back that the 900's later saying makes, dated and placed where it was said again."""
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    indexer = IndexerService(store, HashEmbedder())
    back = ("s3", datetime(2024, 5, 10), "s3t1", SAID[0][3])
    for n, (session, day, tid, text) in enumerate([SAID[0], SAID[2], back]):
        await indexer.write(IndexBatch(records=[statement("a", session, n, day, text, tid)]))
    first, then = history(store.records, store.links, store.segments, "a").supersessions
    assert (first.older.text, first.newer.text) == (SAID[0][3], SAID[2][3])
    assert (then.older.text, then.newer.text) == (SAID[2][3], SAID[0][3])
    assert then.changed_at == datetime(2024, 5, 10) and then.newer.session_id == "s3"
    assert then.newer.said_at == datetime(2024, 5, 10) and first.older.said_at == SAID[0][1]
    assert then.reason == "said again on 2024-05-10 after it was replaced"
    assert then.found_by == "rule:said-again" and first.found_by == "rule:value-change"
    assert len(store.links.of_namespace("a")) == 1  # what was found, unchanged

    print_history(history(store.records, store.links, store.segments, "a"), as_json=False)
    assert "replaced on 2024-05-10" in capsys.readouterr().out
