"""A namespace's history from the links the indexer's rules wrote, on a real LanceDB, and
how `lychee records NS --history` prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.supersession import LinkKind
from streams.cli.data import print_history
from tests.workers.query.test_currency import SAID, indexed
from workers.store.history import history

pytestmark = pytest.mark.asyncio


async def test_history_tells_what_replaced_what_and_the_open_conflicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = await indexed(tmp_path)
    found = history(store.records, store.links, "a")
    (change,) = found.supersessions
    assert (change.older.text, change.newer.text) == (SAID[0][3], SAID[2][3])
    assert change.older.turn_ids == ["s1t1"] and change.newer.session_id == "s2"
    assert change.changed_at is not None and change.changed_at.date().isoformat() == "2024-04-02"
    assert change.found_by == "rule:value-change" and "900 watts then 650 watts" in change.reason
    (conflict,) = found.conflicts
    assert conflict.kind is LinkKind.conflict
    assert {conflict.older.text, conflict.newer.text} == {SAID[1][3], SAID[3][3]}

    one = history(store.records, store.links, "a", change.newer.record_id)
    assert one.supersessions == [change] and one.conflicts == []
    assert history(store.records, store.links, "b").supersessions == []

    print_history(found, as_json=False)
    out = capsys.readouterr().out
    assert "replaced on 2024-04-02 (rule:value-change" in out
    assert f"  was  [2024-03-01] {SAID[0][3]}" in out and "1 supersessions, 1 open conflicts" in out
    print_history(found, as_json=True)
    data = json.loads(capsys.readouterr().out)
    assert data["supersessions"][0]["newer"]["turn_ids"] == ["s2t1"]
